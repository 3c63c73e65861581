package memcache_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// newClient returns a gomemcache client of its own over addrs, sized for the
// concurrency of these tests, closed at the end of the test.
func newClient(t testing.TB, addrs ...string) *gomemcache.Client {
	t.Helper()
	c := gomemcache.New(addrs...)
	c.Timeout = 2 * time.Second
	c.MaxIdleConns = 128
	t.Cleanup(func() { c.Close() })
	return c
}

// newStore returns a Store over a client of its own, closed at the end of
// the test.
func newStore(t testing.TB, opts *memcache.Options, addrs ...string) *memcache.Store {
	t.Helper()
	s := memcache.New(newClient(t, addrs...), opts)
	t.Cleanup(func() { s.Close() })
	return s
}

// firstServer is the address of one real memcached.
func firstServer(t testing.TB) string {
	t.Helper()
	return testenv.MemcacheAddrs(t)[0]
}

// uniqueKey is a key no other test (nor a rerun) shares.
func uniqueKey(t testing.TB) store.Key {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	return store.Key{Namespace: store.Namespace("memcache-test", "p"), Identity: t.Name() + "/" + hex.EncodeToString(b[:])}
}

// mutationFunc adapts a function to store.Mutation.
type mutationFunc func(state []byte) ([]byte, time.Duration)

func (f mutationFunc) Apply(state []byte) ([]byte, time.Duration) { return f(state) }

// put is a mutation that writes v with ttl whatever the state.
func put(v string, ttl time.Duration) store.Mutation {
	return mutationFunc(func([]byte) ([]byte, time.Duration) { return []byte(v), ttl })
}

// testTimeout is the Limiters' deadline in tests: generous, so that a test
// judges what the store decides, not the speed of a loaded machine. It is
// still a deadline, so calls take the path that watches it.
const testTimeout = 10 * time.Second

// newLimiter returns a Limiter over s with the tests' prefix and deadline.
func newLimiter(t testing.TB, s store.Store, alg core.Algorithm, p core.Policy, clock core.Clock) *core.Limiter {
	t.Helper()
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Clock: clock, Prefix: "memcache-test", Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
