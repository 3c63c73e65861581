package redis

import (
	"context"
	"math"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/conformance"
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
	return conformance.Capabilities{Scripts: true, ClockSkew: time.Second}
}

// Exists reads the key through a client of the harness's own
// (conformance.Inspector).
func (h harness) Exists(ctx context.Context, key store.Key) (bool, error) {
	n, err := h.admin.Exists(ctx, key.String()).Result()
	return n == 1, err
}

// TTL reads the key's PTTL (conformance.TTLInspector): go-redis returns
// -2 (ns) for no key, -1 for no expiry.
func (h harness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	d, err := h.admin.PTTL(ctx, key.String()).Result()
	switch {
	case err != nil:
		return 0, false, err
	case d == -2:
		return 0, false, nil
	case d < 0:
		return math.MaxInt64, true, nil
	}
	return d, true, nil
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
