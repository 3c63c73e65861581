package redis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A test that moves slots between masters changes the cluster under every
// other test that uses it, and Redis's gossip can leave a slot claimed by
// no master after quick moves. So such a test gets a cluster of its own: real
// redis-server processes on loopback ports of their own, gone when it ends.

// freePort returns a loopback port that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startCluster starts a Redis Cluster of masters nodes, slots spread
// evenly, and returns their addresses once every node agrees on the slot
// map.
func startCluster(t *testing.T, masters int) []string {
	t.Helper()
	return startClusterSpare(t, masters, 0)
}

// startClusterSpare is startCluster with spare more nodes, which join the
// cluster as masters without a slot (a master just added), their addresses
// last.
func startClusterSpare(t *testing.T, masters, spare int) []string {
	t.Helper()
	masters, withSlots := masters+spare, masters
	if testing.Short() {
		t.Skip("-short: the test starts a server of its own")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not installed: %v", err)
		}
		t.Skipf("redis-server is not installed: %v", err)
	}
	dir := t.TempDir()
	addrs := make([]string, masters)
	buses := make([]int, masters)
	clients := make([]*goredis.Client, masters)
	ctx := context.Background()
	for i := range masters {
		// A port freePort found free may be taken before the node binds it
		// (other tests run beside this one): a node that does not answer
		// within a few seconds is stopped and started on other ports.
		for attempt := 1; ; attempt++ {
			port, bus := freePort(t), freePort(t)
			addrs[i], buses[i] = fmt.Sprintf("127.0.0.1:%d", port), bus
			cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus),
				"--bind", "127.0.0.1", "--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d-%d.conf", i, attempt)),
				"--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
				"--dir", dir, "--logfile", filepath.Join(dir, fmt.Sprintf("redis-%d-%d.log", i, attempt)))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			c := goredis.NewClient(&goredis.Options{Addr: addrs[i], DialTimeout: time.Second})
			up := false
			for range 100 { // 5 s
				if c.Ping(ctx).Err() == nil {
					up = true
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if up {
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				})
				clients[i] = c
				t.Cleanup(func() { _ = c.Close() })
				break
			}
			_ = c.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if attempt == 3 {
				t.Fatalf("cluster node %d did not start on three pairs of ports", i)
			}
		}
	}
	per := 16384 / withSlots
	for i, c := range clients {
		last := (i+1)*per - 1
		if i == withSlots-1 {
			last = 16383
		}
		if i < withSlots { // a spare gets no slot
			if err := c.Do(ctx, "cluster", "addslotsrange", i*per, last).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if i > 0 {
			host, port, _ := strings.Cut(addrs[0], ":")
			if err := c.Do(ctx, "cluster", "meet", host, port, buses[0]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "the cluster to form", func() bool {
		var first string
		for i, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", masters)) {
				return false
			}
			shards, err := c.ClusterShards(ctx).Result()
			if err != nil {
				return false
			}
			var view []string
			for _, sh := range shards {
				for _, n := range sh.Nodes {
					view = append(view, fmt.Sprint(sh.Slots, n.IP, n.Port, n.Role))
				}
			}
			slices.Sort(view)
			if s := strings.Join(view, ";"); i == 0 {
				first = s
			} else if s != first {
				return false
			}
		}
		return true
	})
	return addrs
}

// waitFor polls cond every 20ms, for at most 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
