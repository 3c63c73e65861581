package memcache_test

import (
	"context"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/internal/inspect"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// harness gives the conformance suite Stores over real memcached: one
// server, or a pool of both test servers.
type harness struct {
	addrs []string
	// inspect is a client of the harness's own, for Exists.
	inspect *gomemcache.Client
}

func newHarness(t testing.TB, pool bool) *harness {
	addrs := testenv.MemcacheAddrs(t)
	if !pool {
		addrs = addrs[:1]
	}
	return &harness{addrs: addrs, inspect: newClient(t, addrs...)}
}

// NewStore returns a Store over a client of its own: a separate instance.
// Servers lets the Store read memcached's clock for TTLs past 30 days.
func (h *harness) NewStore(t testing.TB) store.Store {
	return newStore(t, &memcache.Options{Servers: h.addrs}, h.addrs...)
}

// Capabilities: every algorithm, no scripts; each Limiter's clock decides,
// so the fleet's clock skew is declared (see the package doc for what it
// costs each algorithm).
func (h *harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{ClockSkew: time.Second, Processes: true}
}

// Exists and TTL read the key the Store would use for key
// (conformance.Inspector, TTLInspector).
func (h *harness) Exists(ctx context.Context, key store.Key) (bool, error) {
	return inspect.Memcache(h.inspect, h.addrs).Exists(ctx, key)
}

func (h *harness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	return inspect.Memcache(h.inspect, h.addrs).TTL(ctx, key)
}

var (
	_ conformance.Inspector    = (*harness)(nil)
	_ conformance.TTLInspector = (*harness)(nil)
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool bool
	}{{"single", false}, {"pool", true}} {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness(t, tc.pool) })
		})
	}
}
