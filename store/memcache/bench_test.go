package memcache_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// BenchmarkConformance is the suite's matrix against one real memcached:
// GCRA and the token bucket, 1 key and 10,000 keys, serial and parallel,
// with a policy that admits (and so writes) nearly every call: a gets and a
// cas (or add) per decision.
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, func(b *testing.B) conformance.Harness { return newHarness(b, false) })
}

// BenchmarkDenied: a denial writes nothing, so it costs one gets.
func BenchmarkDenied(b *testing.B) {
	for _, alg := range []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}} {
		b.Run(alg.Name(), func(b *testing.B) {
			s := newStore(b, nil, firstServer(b))
			l := benchLimiter(b, s, alg, core.Policy{Name: "denied", Limit: 1, Window: time.Hour})
			id := uniqueKey(b).Identity
			ctx := context.Background()
			if d, err := l.Allow(ctx, id); err != nil || !d.Allowed {
				b.Fatalf("first call: %+v, %v", d, err)
			}
			run(b, func() error {
				d, err := l.Allow(ctx, id)
				if err == nil && d.Allowed {
					b.Error("admitted past the limit")
				}
				return err
			})
		})
	}
}

// BenchmarkHotKey: 32 goroutines per CPU on one key through one Store, with
// and without the per-key queue, with a policy that admits every call, at
// the default deadline. Calls that fail (without the queue, mostly at the
// deadline) are counted in errors/op, not fatal: they are what the queue is
// there to prevent.
func BenchmarkHotKey(b *testing.B) {
	for _, noQueue := range []bool{false, true} {
		b.Run("NoLocalQueue="+strconv.FormatBool(noQueue), func(b *testing.B) {
			s := newStore(b, &memcache.Options{NoLocalQueue: noQueue}, firstServer(b))
			l := benchLimiter(b, s, algorithm.GCRA{}, core.Policy{Name: "hot", Limit: 1_000_000, Window: time.Second})
			id := uniqueKey(b).Identity
			ctx := context.Background()
			var failed atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Allow(ctx, id); err != nil {
						failed.Add(1)
					}
				}
			})
			reportRate(b)
			st := s.Stats()
			b.ReportMetric(float64(st.Conflicts)/float64(max(st.Updates, 1)), "conflicts/op")
			b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
		})
	}
}

// benchLimiter is a Limiter as production runs it: no Clock, the default
// deadline.
func benchLimiter(b *testing.B, s store.Store, alg core.Algorithm, p core.Policy) *core.Limiter {
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Prefix: "memcache-bench"})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// run times call serially and in parallel.
func run(b *testing.B, call func() error) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
}

func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
}
