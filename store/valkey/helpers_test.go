package valkey_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// backend is one kind of real server the tests run against.
type backend struct {
	name  string
	addrs func(testing.TB) []string
}

var backends = []backend{
	{"server", func(t testing.TB) []string { return []string{testenv.RedisAddr(t)} }},
	{"cluster", testenv.RedisClusterAddrs},
}

// forEachBackend runs f against the single server and the 3-master cluster.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// newClient connects a fresh valkey-go client to addrs; it is closed when
// the test ends. A single address is a single server (valkey-go falls back
// from cluster mode by itself), several are a cluster.
func newClient(t testing.TB, addrs []string) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("valkey-go client for %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// newStore is a Store over a fresh client; the store is closed, then the
// client, when the test ends.
func newStore(t testing.TB, addrs []string) (*valkey.Store, valkeygo.Client) {
	t.Helper()
	c := newClient(t, addrs)
	s := valkey.New(c, nil)
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

// freshKey is a key no other test (or earlier run) uses, deleted when the
// test ends.
func freshKey(t testing.TB, c valkeygo.Client) store.Key {
	t.Helper()
	k := store.Key{Namespace: "sluice-valkey-test:" + randomHex(t), Identity: randomHex(t)}
	t.Cleanup(func() { c.Do(context.Background(), c.B().Del().Key(k.String()).Build()) })
	return k
}

func randomHex(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// flushScripts empties the script cache of every node behind c.
func flushScripts(t testing.TB, c valkeygo.Client) error {
	t.Helper()
	for addr, n := range c.Nodes() {
		if err := n.Do(context.Background(), n.B().ScriptFlush().Build()).Error(); err != nil {
			return &nodeError{addr, err}
		}
	}
	return nil
}

type nodeError struct {
	addr string
	err  error
}

func (e *nodeError) Error() string { return e.addr + ": " + e.err.Error() }
