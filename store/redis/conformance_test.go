package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/internal/inspect"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// harness runs the suite on a real backend (a redis-server, the cluster,
// or the Sentinel's primary), each NewStore with a user's client of its own
// (go-redis defaults).
type harness struct {
	client func(testing.TB) goredis.UniversalClient
	opts   *Options
	admin  goredis.UniversalClient
}

func (h harness) NewStore(t testing.TB) store.Store {
	s := New(h.client(t), h.opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{Scripts: true, ClockSkew: time.Second, Processes: true}
}

// Exists and TTL read the key through a client of the harness's own
// (conformance.Inspector, TTLInspector).
func (h harness) Exists(ctx context.Context, key store.Key) (bool, error) {
	return inspect.Redis(h.admin).Exists(ctx, key)
}

func (h harness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	return inspect.Redis(h.admin).TTL(ctx, key)
}

var (
	_ conformance.Inspector    = harness{}
	_ conformance.TTLInspector = harness{}
)

func TestConformance(t *testing.T) {
	single := func(t testing.TB) goredis.UniversalClient { return userClient(t) }
	cluster := func(t testing.TB) goredis.UniversalClient { return userCluster(t) }
	sentinel := func(t testing.TB) goredis.UniversalClient { return userFailover(t, testenv.SentinelMaster) }
	for _, tc := range []struct {
		name   string
		client func(testing.TB) goredis.UniversalClient
		opts   *Options
	}{
		{"single", single, nil},
		{"single-direct", single, &Options{NoBatch: true}},
		{"cluster", cluster, nil},
		{"sentinel", sentinel, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness {
				return harness{client: tc.client, opts: tc.opts, admin: tc.client(t)}
			})
		})
	}
}

func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, func(b *testing.B) conformance.Harness {
		return harness{client: func(t testing.TB) goredis.UniversalClient { return userClient(t) }, admin: userClient(b)}
	})
}
