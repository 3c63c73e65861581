package faults

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// need returns the path of bin, or ends the test: skipped on a machine
// without it, failed when the run promised servers.
func need(t testing.TB, bin string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: the test starts a %s of its own", bin)
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: %v", bin, err)
		}
		t.Skipf("%s is not installed: %v", bin, err)
	}
	return p
}

// freePort returns a loopback port that nothing listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// server is a redis-server or memcached process of one test's own, which
// the test may kill and start again on the same port (and, for Redis, the
// same data: it keeps an append-only file, written before each reply, so
// that a write it acknowledged survives a SIGKILL).
type server struct {
	t    testing.TB
	kind string // "redis" or "memcached"
	bin  string
	args []string
	Addr string
	cmd  *exec.Cmd
}

func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := need(t, "redis-server")
	port := freePort(t)
	dir := t.TempDir()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log")}, extra...)
	s := &server{t: t, kind: "redis", bin: bin, args: args, Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

func startMemcached(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := need(t, "memcached")
	port := freePort(t)
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "64", "-c", "1024"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached refuses to run as root unless told to
	}
	args = append(args, extra...)
	s := &server{t: t, kind: "memcached", bin: bin, args: args, Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Start starts the process and returns once it answers.
func (s *server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.ready() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s on %s did not start", s.kind, s.Addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ready reports whether the server answers a ping.
func (s *server) ready() bool {
	c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	ping, want := "PING\r\n", "+PONG"
	if s.kind == "memcached" {
		ping, want = "version\r\n", "VERSION"
	}
	if _, err := c.Write([]byte(ping)); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, want)
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (s *server) Kill() { s.stop(syscall.SIGKILL) }

// Stop ends the process gracefully (SIGTERM) and waits for it.
func (s *server) Stop() { s.stop(syscall.SIGTERM) }

func (s *server) stop(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	_ = s.cmd.Wait()
}

// admin returns a go-redis client straight to the server (not through a
// proxy), closed when the test ends.
func (s *server) admin() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// cluster is a Redis Cluster of three masters of the test's own, without
// replicas and with cluster-require-full-coverage off: losing one master
// loses its slots only.
type cluster struct {
	nodes []*server
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	const masters = 3
	c := &cluster{}
	buses := make([]int, masters)
	for i := range masters {
		buses[i] = freePort(t)
		dir := t.TempDir()
		c.nodes = append(c.nodes, startRedis(t, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(buses[i]),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "1000",
			"--cluster-require-full-coverage", "no"))
	}
	ctx := context.Background()
	per := 16384 / masters
	for i, n := range c.nodes {
		a := n.admin()
		last := (i+1)*per - 1
		if i == masters-1 {
			last = 16383
		}
		if err := a.Do(ctx, "cluster", "addslotsrange", i*per, last).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(c.nodes[0].Addr, ":")
			if err := a.Do(ctx, "cluster", "meet", host, port, buses[0]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.waitOK(t)
	return c
}

// waitOK waits until every node reports cluster_state:ok with all nodes
// known and no node flagged as failing.
func (c *cluster) waitOK(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, n := range c.nodes {
			a := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
			info, err := a.ClusterInfo(ctx).Result()
			nodes, err2 := a.ClusterNodes(ctx).Result()
			_ = a.Close()
			if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.nodes))) || strings.Contains(nodes, "fail") {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not form")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNodeOK waits until node n reports cluster_state:ok: a master that
// restarts serves its slots only some time after it rejoins (Redis waits
// 2 s, so that the cluster may reconfigure it first).
func (c *cluster) waitNodeOK(t testing.TB, n *server) {
	t.Helper()
	a := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
	defer a.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := a.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not rejoin the cluster", n.Addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *cluster) addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.Addr)
	}
	return a
}

// owner returns the node that serves key's slot.
func (c *cluster) owner(t testing.TB, key string) *server {
	t.Helper()
	slot, err := c.nodes[0].admin().ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return c.nodes[min(int(slot)/(16384/len(c.nodes)), len(c.nodes)-1)]
}
