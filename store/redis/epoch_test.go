package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// A Clock that reads the Unix epoch (a zero core.ManualClock), or before
// it, is a time the Limiter decides at, as the Go steps do (clamped to
// 0), not "the server's clock", which the scripts take a now of 0 for:
// every algorithm, on the Limiter's script, the multi-limit script and
// their refunds, decides on a real server as on the memory store.
func TestClockAtTheEpoch(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	algs := []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.LeakyBucket{}, algorithm.FixedWindow{},
		algorithm.SlidingCounter{}, algorithm.SlidingLog{}}
	for _, start := range []time.Time{time.UnixMicro(0), time.UnixMicro(-5_000_000)} {
		for _, alg := range algs {
			clk := core.NewManualClock(start)
			p := core.Policy{Name: "epoch", Limit: 2, Window: 10 * time.Second}
			l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Clock: clk, Prefix: "sluice-test"})
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("%s-%d-%d", alg.Name(), start.UnixMicro(), time.Now().UnixNano())
			t.Cleanup(func() { _ = l.Reset(context.Background(), id) })
			admitted := int64(0)
			for i := range l.Quota() + 1 {
				d, err := l.Allow(ctx, id)
				if err != nil {
					t.Fatalf("%s at %v, call %d: %v", alg.Name(), start, i, err)
				}
				if d.Allowed {
					admitted++
				} else if d.RetryAfter > 2*p.Window {
					t.Fatalf("%s at %v, call %d: %+v; want a wait within the window", alg.Name(), start, i, d)
				}
			}
			if admitted != l.Quota() {
				t.Fatalf("%s at %v: %d admitted at one instant, want the quota %d", alg.Name(), start, admitted, l.Quota())
			}
			clk.Advance(3 * p.Window)
			if d, err := l.Allow(ctx, id); err != nil || !d.Allowed || d.ResetAfter > 2*p.Window {
				t.Fatalf("%s at %v, three windows later: %+v, %v; want admitted", alg.Name(), start, d, err)
			}
			_, rc, err := l.Charge(ctx, id+"-charge", 1)
			if err != nil || rc == nil {
				t.Fatalf("%s at %v: Charge: %v, %v", alg.Name(), start, rc, err)
			}
			t.Cleanup(func() { _ = l.Reset(context.Background(), id+"-charge") })
			if _, err := rc.Refund(ctx, 1); err != nil && err != core.ErrNotRefunded {
				t.Fatalf("%s at %v: Refund: %v", alg.Name(), start, err)
			}
		}
	}
}

// The same for a Multi, on its script and its refund script.
func TestMultiClockAtTheEpoch(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, nil)
	for _, start := range []time.Time{time.UnixMicro(0), time.UnixMicro(-5_000_000)} {
		clk := core.NewManualClock(start)
		m, err := core.NewMulti(core.MultiConfig{Name: "epoch-multi", Store: s, Clock: clk, Prefix: "sluice-test"})
		if err != nil {
			t.Fatal(err)
		}
		ls := core.MustLimits(
			core.Limit{Policy: core.Policy{Name: "g", Limit: 2, Window: 10 * time.Second}, Algorithm: algorithm.GCRA{}},
			core.Limit{Policy: core.Policy{Name: "w", Limit: 5, Window: 10 * time.Second}, Algorithm: algorithm.FixedWindow{}},
		)
		id := fmt.Sprintf("multi-%d-%d", start.UnixMicro(), time.Now().UnixNano())
		t.Cleanup(func() { _ = m.Reset(context.Background(), id, ls) })
		for i := range 3 {
			d, _, err := m.Allow(ctx, id, ls, nil)
			if err != nil || d.Allowed != (i < 2) || d.RetryAfter > 10*time.Second {
				t.Fatalf("at %v, call %d: %+v, %v; want 2 admitted, then a refusal within the window", start, i, d, err)
			}
		}
		clk.Advance(30 * time.Second)
		d, _, rc, err := m.Charge(ctx, id, ls, 1, nil)
		if err != nil || !d.Allowed || rc == nil {
			t.Fatalf("at %v, three windows later: %+v, %v, %v; want admitted with a receipt", start, d, rc, err)
		}
		if k, err := rc.Refund(ctx, 1); err != nil || k != 1 {
			t.Fatalf("at %v: Refund: %d, %v; want 1 back", start, k, err)
		}
	}
}
