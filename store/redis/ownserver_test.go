package redis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// ownServer is a redis-server process of one test's own, on a loopback port
// of its own: a test may stall it (DEBUG SLEEP, which the shared server
// refuses), squeeze its memory, change its eviction policy or stop it,
// and no other test sees it.
type ownServer struct {
	addr  string
	cmd   *exec.Cmd
	admin *goredis.Client
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
	port := freePort(t)
	argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"), "--enable-debug-command", "local"}, args...)
	s := &ownServer{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: exec.Command(bin, argv...)}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	s.admin = goredis.NewClient(&goredis.Options{Addr: s.addr})
	t.Cleanup(func() { _ = s.admin.Close() })
	waitFor(t, "redis-server on "+s.addr, func() bool { return s.admin.Ping(context.Background()).Err() == nil })
	return s
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
