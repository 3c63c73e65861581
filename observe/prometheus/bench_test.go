package prometheus

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// BenchmarkObserver measures what the Observer adds to a memory-store
// decision: the same Limiter with and without it, in one run (compare the
// ns/op of the pairs; the target is ≤ 30 ns and 0 allocs added).
func BenchmarkObserver(b *testing.B) {
	o, _ := newObserver(b, Options{})
	s := memory.New(&memory.Options{SweepInterval: -1})
	b.Cleanup(func() { s.Close() })
	// A limit no run reaches: every decision is an admission, far from
	// the limit, as most are.
	p := core.Policy{Name: "bench", Limit: 1_000_000_000, Window: time.Hour}
	mk := func(obs func(core.Event)) *core.Limiter {
		l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: s, Observer: obs})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name string
		l    *core.Limiter
	}{{"bare", mk(nil)}, {"observed", mk(o.Observe)}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.l.Allow(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.l.Allow(ctx, "k"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkObserve is the Observer alone, on an admission.
func BenchmarkObserve(b *testing.B) {
	o, _ := newObserver(b, Options{})
	e := core.Event{Policy: "bench", Op: "allow", Decision: core.Decision{Allowed: true, Limit: 100, Remaining: 50}}
	b.ReportAllocs()
	for b.Loop() {
		o.Observe(e)
	}
}
