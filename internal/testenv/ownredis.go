package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// OwnRedis is a redis-server process of one test's own, on a loopback port
// of its own: a test may stall it (DEBUG SLEEP, which the shared server
// refuses), squeeze its memory, change its eviction policy or kill it, and
// no other test sees it.
type OwnRedis struct {
	Addr string
	cmd  *exec.Cmd
	once sync.Once
}

// StartRedis starts a redis-server with args added to its command line
// and returns once it answers PING; it is killed when t ends. It skips
// under -short, and where redis-server is not installed (failing instead
// when SLUICE_REQUIRE_SERVERS or CI is set).
func StartRedis(t testing.TB, args ...string) *OwnRedis {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the test starts a redis-server of its own")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not installed: %v", err)
		}
		t.Skipf("redis-server is not installed: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir := t.TempDir()
	argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"), "--enable-debug-command", "local"}, args...)
	r := &OwnRedis{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: exec.Command(bin, argv...)}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	for deadline := time.Now().Add(10 * time.Second); !answers(r.Addr); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not start", r.Addr)
		}
	}
	return r
}

// Stop kills the server and waits until it is gone: from then on a dial is
// refused. It may be called more than once.
func (r *OwnRedis) Stop() {
	r.once.Do(func() {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	})
}

// answers reports whether a redis-server at addr answers PING.
func answers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}
