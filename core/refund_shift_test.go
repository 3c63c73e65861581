package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A refund of an earlier charge moves a bucket's later charges back in
// time; a later charge's refund must then not give back units that the
// refill has since restored and another charge has taken. Two charges of
// 5 empty a burst of 10; the first is refunded; 600 ms later the bucket is
// full again and a charge of the whole quota empties it; the second
// charge's refund must give back nothing of that one. (The leaky bucket
// refunds no charge that another queued behind, so the first refund here
// gives nothing there: TestLeakyBucketRefundKeepsTheQueueShaped.)
func TestRefundAfterAnEarlierRefundKeepsTheBurst(t *testing.T) {
	for _, alg := range []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			ctx := context.Background()
			clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
			st := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
			t.Cleanup(func() { _ = st.Close() })
			l, err := core.New(core.Config{Policy: core.Policy{Name: "r", Limit: 10, Window: time.Second, Burst: 10}, Algorithm: alg, Store: st, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			charge := func(n int64) *core.Receipt {
				d, r, err := l.Charge(ctx, "id", n)
				if err != nil || !d.Allowed || r == nil {
					t.Fatalf("Charge(%d): %+v, %v, %v", n, d, r, err)
				}
				return r
			}
			a := charge(5)
			y := charge(5)
			if k, err := a.Refund(ctx, 5); err != nil || k != 5 {
				t.Fatalf("refund of the first charge at its instant: %d, %v; want 5", k, err)
			}
			clk.Advance(600 * time.Millisecond)
			quota := l.Quota()
			charge(quota)
			_, _ = y.Refund(ctx, 5)
			more := 0
			for range 20 {
				if d, err := l.Allow(ctx, "id"); err == nil && d.Allowed {
					more++
				}
			}
			if more > 0 {
				t.Fatalf("OVER-ADMISSION: %d admitted at the instant a charge of the whole quota (%d) was made", more, quota)
			}
		})
	}
}

// A leaky bucket's receipt refunded in parts: once a later request queued
// behind what is left of the charge, the rest of it stays, so that the
// starts the queue gave stay one interval apart. R1 starts at once; R2
// (3 units) is given 300 ms; 1 of its units is refunded; R3 queues
// behind what is left of it; R2's other 2 units must then give nothing.
func TestLeakyBucketPartialRefundKeepsTheQueueShaped(t *testing.T) {
	ctx := context.Background()
	clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
	st := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	t.Cleanup(func() { _ = st.Close() })
	l, err := core.New(core.Config{Policy: core.Policy{Name: "q", Limit: 10, Window: time.Second, Burst: 1, MaxDelay: time.Second}, Algorithm: algorithm.LeakyBucket{}, Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	charge := func(n int64) (core.Decision, *core.Receipt) {
		t.Helper()
		d, r, err := l.Charge(ctx, "id", n)
		if err != nil || !d.Allowed || r == nil {
			t.Fatalf("Charge(%d): %+v, %v, %v", n, d, r, err)
		}
		return d, r
	}
	charge(1)
	d2, r2 := charge(3)
	if d2.Delay != 300*time.Millisecond {
		t.Fatalf("R2's Delay %v, want 300ms", d2.Delay)
	}
	clk.Advance(50 * time.Millisecond)
	if k, err := r2.Refund(ctx, 1); err != nil || k != 1 {
		t.Fatalf("refund of 1 of R2's units: %d, %v; want 1", k, err)
	}
	d3, _ := charge(1)
	if k, _ := r2.Refund(ctx, 2); k != 0 {
		t.Errorf("R2's other 2 units gave back %d with R3 (start %v) queued behind them; want 0", k, d3.Delay+50*time.Millisecond)
	}
	// The requests after R3 start one interval apart, after it: R3's
	// start is not given again.
	last := d3.Delay + 50*time.Millisecond
	for i := range 3 {
		d, _ := charge(1)
		if start := d.Delay + 50*time.Millisecond; start < last+100*time.Millisecond {
			t.Errorf("request %d after R3 starts at %v, under an interval after the start before it (%v)", i+1, start, last)
		} else {
			last = start
		}
	}
}
