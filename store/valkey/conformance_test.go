package valkey_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/internal/inspect"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// harness runs the suite on the real redis-server, the real cluster, or the
// primary a real Sentinel watches: each NewStore is a valkey-go client of
// its own, as each instance of a fleet has.
type harness struct {
	addrs  []string
	master string          // when set, addrs are sentinels that watch this master
	admin  valkeygo.Client // reads keys for Exists
}

func (h harness) client(t testing.TB) valkeygo.Client {
	if h.master == "" {
		return newClient(t, h.addrs)
	}
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress: h.addrs, DisableCache: true,
		Sentinel: valkeygo.SentinelOption{MasterSet: h.master},
	})
	if err != nil {
		t.Fatalf("valkey-go sentinel client for %v: %v", h.addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

func (h harness) NewStore(t testing.TB) store.Store {
	s := valkey.New(h.client(t), nil)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{Scripts: true, ClockSkew: valkey.DefaultClockSkew, Processes: true}
}

// Exists and TTL read the key through the harness's own client
// (conformance.Inspector, TTLInspector).
func (h harness) Exists(ctx context.Context, key store.Key) (bool, error) {
	return inspect.Valkey(h.admin).Exists(ctx, key)
}

func (h harness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	return inspect.Valkey(h.admin).TTL(ctx, key)
}

var (
	_ conformance.Inspector    = harness{}
	_ conformance.TTLInspector = harness{}
)

func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		conformance.Run(t, func(t *testing.T) conformance.Harness {
			addrs := b.addrs(t)
			return harness{addrs: addrs, admin: newClient(t, addrs)}
		})
	})
}

// TestConformanceSentinel runs the suite through valkey-go's own Sentinel
// support (ClientOption.Sentinel), which the store takes as it is.
func TestConformanceSentinel(t *testing.T) {
	conformance.Run(t, func(t *testing.T) conformance.Harness {
		h := harness{addrs: []string{testenv.RedisSentinelAddr(t)}, master: testenv.SentinelMaster}
		h.admin = h.client(t)
		return h
	})
}

func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, func(b *testing.B) conformance.Harness {
		addrs := backends[0].addrs(b)
		return harness{addrs: addrs, admin: newClient(b, addrs)}
	})
}
