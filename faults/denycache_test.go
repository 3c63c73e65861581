package faults

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// counting counts the round trips a script store makes.
type counting struct {
	store.Store
	r     store.ScriptRunner
	calls atomic.Int64
}

func (c *counting) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	c.calls.Add(1)
	return c.Store.Update(ctx, key, m)
}

func (c *counting) RunScript(ctx context.Context, s *store.Script, key store.Key, args store.ScriptArgs) (store.ScriptResult, error) {
	c.calls.Add(1)
	return c.r.RunScript(ctx, s, key, args)
}

func floodLimiter(t testing.TB, s store.Store, deny *core.DenyCacheOptions) *core.Limiter {
	t.Helper()
	l, err := core.New(core.Config{Policy: core.PerMinute("flood", 10), Algorithm: algorithm.GCRA{}, Store: s, DenyCache: deny})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDenyCacheFloodOnRedis floods one key over its limit on a real
// redis-server: without the deny cache each refused request is a round
// trip; with it, one round trip refuses the key for its RetryAfter.
func TestDenyCacheFloodOnRedis(t *testing.T) {
	srv := startRedis(t)
	for _, sk := range storeKinds[:2] {
		for _, on := range []bool{false, true} {
			st := sk.open(t, []string{srv.Addr}, false)
			c := &counting{Store: st, r: st.(store.ScriptRunner)}
			var opts *core.DenyCacheOptions
			if on {
				opts = &core.DenyCacheOptions{}
			}
			l := floodLimiter(t, c, opts)
			ctx := context.Background()
			id := sk.name + time.Now().String()
			for range 10 {
				if d, err := l.Allow(ctx, id); err != nil || !d.Allowed {
					t.Fatalf("%s: quota: %+v, %v", sk.name, d, err)
				}
			}
			c.calls.Store(0)
			const flood = 2000
			start := time.Now()
			for range flood {
				if d, err := l.Allow(ctx, id); err != nil || d.Allowed {
					t.Fatalf("%s: flood: %+v, %v; want refused", sk.name, d, err)
				}
			}
			took := time.Since(start)
			perReq := float64(c.calls.Load()) / flood
			t.Logf("%s, deny cache %v: %.3f store calls per refused request, %.0f decisions/s", sk.name, on, perReq, flood/took.Seconds())
			if on && c.calls.Load() > 1 {
				t.Errorf("%s with the deny cache: %d store calls for a flood of %d refused requests, want at most 1", sk.name, c.calls.Load(), flood)
			}
			if !on && c.calls.Load() != flood {
				t.Errorf("%s without the deny cache: %d store calls for %d requests", sk.name, c.calls.Load(), flood)
			}
		}
	}
}

// BenchmarkDenyCacheFloodRedis: decisions per second and store calls per
// request under a one-key flood on a real redis-server, deny cache off and
// on, serial and parallel.
func BenchmarkDenyCacheFloodRedis(b *testing.B) {
	srv := startRedis(b)
	for _, sk := range storeKinds[:2] {
		for _, on := range []bool{false, true} {
			for _, parallel := range []bool{false, true} {
				name := sk.name + "/off"
				if on {
					name = sk.name + "/on"
				}
				if parallel {
					name += "/parallel"
				} else {
					name += "/serial"
				}
				b.Run(name, func(b *testing.B) {
					st := sk.open(b, []string{srv.Addr}, false)
					c := &counting{Store: st, r: st.(store.ScriptRunner)}
					var opts *core.DenyCacheOptions
					if on {
						opts = &core.DenyCacheOptions{}
					}
					l := floodLimiter(b, c, opts)
					ctx := context.Background()
					id := name + time.Now().String()
					for range 20 {
						_, _ = l.Allow(ctx, id)
					}
					c.calls.Store(0)
					b.ReportAllocs()
					b.ResetTimer()
					if parallel {
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								_, _ = l.Allow(ctx, id)
							}
						})
					} else {
						for range b.N {
							_, _ = l.Allow(ctx, id)
						}
					}
					b.ReportMetric(float64(c.calls.Load())/float64(b.N), "storecalls/op")
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				})
			}
		}
	}
}
