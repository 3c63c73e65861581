package valkey_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// ownServer is a redis-server process of one test's own, on a loopback port
// of its own: a test may stall it (DEBUG SLEEP, which the shared server
// refuses), squeeze its memory, change its eviction policy or stop it, and
// no other test sees it.
type ownServer struct {
	addr  string
	cmd   *exec.Cmd
	admin valkeygo.Client
}

// startServer starts a redis-server with args added to its command line;
// it is stopped when the test ends.
func startServer(t *testing.T, args ...string) *ownServer {
	t.Helper()
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"), "--enable-debug-command", "local"}, args...)
	s := &ownServer{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: exec.Command(bin, argv...)}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	for i := 0; ; i++ {
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{s.addr}, DisableCache: true, ForceSingleClient: true})
		if err == nil && c.Do(context.Background(), c.B().Ping().Build()).Error() == nil {
			s.admin = c
			t.Cleanup(c.Close)
			return s
		}
		if c != nil {
			c.Close()
		}
		if i == 200 {
			t.Fatalf("redis-server on %s did not start: %v", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits until it is gone: from then on a dial is
// refused.
func (s *ownServer) Stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// client is a fresh single-node client of the server, closed when the test
// ends.
func (s *ownServer) client(t *testing.T) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{s.addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatalf("valkey-go client for %s: %v", s.addr, err)
	}
	t.Cleanup(c.Close)
	return c
}
