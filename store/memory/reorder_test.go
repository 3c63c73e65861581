package memory_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// spanClock is the system clock, keeping the earliest and the latest time
// it gave: every decision's now lies between them.
type spanClock struct{ first, last atomic.Int64 }

func (c *spanClock) Now() time.Time {
	t := time.Now()
	u := t.UnixMicro()
	for f := c.first.Load(); (f == 0 || u < f) && !c.first.CompareAndSwap(f, u); f = c.first.Load() {
	}
	for l := c.last.Load(); u > l && !c.last.CompareAndSwap(l, u); l = c.last.Load() {
	}
	return t
}

// span is last − first, in µs.
func (c *spanClock) span() int64 { return c.last.Load() - c.first.Load() }

// A Limiter with a Clock of its own clamps what it reads from the memory
// store for clock skew (the store declares none). Under contention a
// decision whose clock was read before another's may take the shard's lock
// after it: if the store stepped it at the earlier time, the clamp would
// pull the later decision's TAT back to it, and the next decisions would
// admit the difference again. The store reads such a decision's time under
// its lock, so the units admitted stay within GCRA's bound over the span of
// every time the clock gave: Burst + ⌊span/T⌋.
func TestAClockReadBeforeTheLockIsNotAStepBack(t *testing.T) {
	const goroutines, calls = 8, 20_000
	pol := core.Policy{Name: "p", Limit: 200_000, Window: time.Second, Burst: 1} // T = 5 µs
	check := func(t *testing.T, decide func() bool, clk *spanClock) {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range calls {
					if decide() {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		bound := pol.Burst + clk.span()/5
		if got := admitted.Load(); got > bound {
			t.Fatalf("OVER-ADMISSION: %d admitted over %d µs; GCRA admits at most %d", got, clk.span(), bound)
		}
	}
	t.Run("Limiter", func(t *testing.T) {
		clk := &spanClock{}
		s := memory.New(nil)
		t.Cleanup(func() { _ = s.Close() })
		l, err := core.New(core.Config{Policy: pol, Algorithm: algorithm.GCRA{}, Store: s, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		check(t, func() bool {
			d, err := l.Allow(context.Background(), "k")
			if err != nil {
				t.Error(err)
			}
			return d.Allowed
		}, clk)
	})
	t.Run("Multi", func(t *testing.T) {
		clk := &spanClock{}
		s := memory.New(nil)
		t.Cleanup(func() { _ = s.Close() })
		m, err := core.NewMulti(core.MultiConfig{Name: "m", Store: s, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		ls := core.MustLimits(core.Limit{Policy: pol, Algorithm: algorithm.GCRA{}})
		check(t, func() bool {
			d, _, err := m.Allow(context.Background(), "k", ls, nil)
			if err != nil {
				t.Error(err)
			}
			return d.Allowed
		}, clk)
	})
}
