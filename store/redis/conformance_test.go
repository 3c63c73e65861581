package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
)

// harness runs the suite on the real redis-server or the real cluster, each
// NewStore with a user's client of its own (go-redis defaults).
type harness struct {
	cluster bool
	opts    *Options
	admin   goredis.UniversalClient
}

func (h harness) NewStore(t testing.TB) core.Store {
	if h.cluster {
		return newClusterStore(t, h.opts)
	}
	return newStore(t, h.opts)
}

func (harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{Scripts: true, ClockSkew: time.Second}
}

// Exists reads the key through a client of the harness's own
// (conformance.Inspector).
func (h harness) Exists(ctx context.Context, key core.Key) (bool, error) {
	n, err := h.admin.Exists(ctx, key.String()).Result()
	return n == 1, err
}

var _ conformance.Inspector = harness{}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster bool
		opts    *Options
	}{
		{"single", false, nil},
		{"single-direct", false, &Options{NoBatch: true}},
		{"cluster", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness {
				h := harness{cluster: tc.cluster, opts: tc.opts}
				if tc.cluster {
					testenv.RedisClusterAddrs(t)
					h.admin = userCluster(t)
				} else {
					h.admin = userClient(t)
				}
				return h
			})
		})
	}
}

func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, func(b *testing.B) conformance.Harness {
		return harness{admin: userClient(b)}
	})
}
