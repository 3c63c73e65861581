// Package testenv gives tests the addresses of the real servers that
// scripts/servers.sh (run by `make test`) starts on loopback.
//
// When a variable is unset the test is skipped, so that `go test ./...`
// works on a machine without servers; but when SLUICE_REQUIRE_SERVERS is set
// (make test sets it) or CI is set, a missing server fails the test instead:
// a skipped test must never pass for a run that promised real servers.
package testenv

import (
	"net"
	"os"
	"strings"
	"testing"
)

func lookup(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
		t.Fatalf("%s is not set: run the tests with `make test`, which starts the servers", name)
	}
	t.Skipf("%s is not set; `make test` starts a real server for this test", name)
	return ""
}

// RedisAddr is the address of a real redis-server (host:port).
func RedisAddr(t testing.TB) string { return lookup(t, "SLUICE_REDIS_ADDR") }

// RedisClusterAddrs are the addresses of a real 3-master Redis Cluster.
func RedisClusterAddrs(t testing.TB) []string {
	return strings.Split(lookup(t, "SLUICE_REDIS_CLUSTER_ADDRS"), ",")
}

// The masters the Sentinel at RedisSentinelAddr watches: SentinelMaster, a
// primary that stays one, and SentinelFailoverMaster, a primary with one
// in-sync replica, which only the test that fails it over may use.
const (
	SentinelMaster         = "sluice"
	SentinelFailoverMaster = "sluice-failover"
)

// RedisSentinelAddr is the address of a real Redis Sentinel.
func RedisSentinelAddr(t testing.TB) string { return lookup(t, "SLUICE_REDIS_SENTINEL_ADDR") }

// MemcacheAddrs are the addresses of two real memcached servers.
func MemcacheAddrs(t testing.TB) []string {
	return strings.Split(lookup(t, "SLUICE_MEMCACHE_ADDRS"), ",")
}

// SilentListener returns a loopback address that accepts connections and
// never answers on them, until t ends: a server gone silent.
func SilentListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64)
	t.Cleanup(func() {
		_ = ln.Close()
		close(held)
		for c := range held {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case held <- c:
			default:
				_ = c.Close()
			}
		}
	}()
	return ln.Addr().String()
}
