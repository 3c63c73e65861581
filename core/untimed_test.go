package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// An in-process store's decisions are not store calls: no Event of
// theirs carries a Duration, whichever call made it (Allow, Charge,
// Reserve, Acquire and Release, a Multi).
func TestInProcessDecisionsAreNotTimed(t *testing.T) {
	ctx := context.Background()
	s := memory.New(nil)
	var heard []core.Event
	observe := func(e core.Event) { heard = append(heard, e) }
	newL := func(p core.Policy, alg core.Algorithm) *core.Limiter {
		l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Observer: observe})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	rate := newL(core.PerMinute("rate", 10), algorithm.GCRA{})
	rate.Allow(ctx, "a")
	rate.Charge(ctx, "a", 1)
	rate.Reserve(ctx, "a", 2, time.Second)
	slots := newL(core.Policy{Name: "slots", Limit: 1, Window: time.Minute}, algorithm.Concurrency{})
	if ls, _, err := slots.Acquire(ctx, "a"); err == nil && ls != nil {
		ls.Release(ctx)
	}
	ls, err := core.NewLimits(core.Limit{Policy: core.PerMinute("m1", 5), Algorithm: algorithm.FixedWindow{}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := core.NewMulti(core.MultiConfig{Name: "multi", Store: s, Observer: observe})
	if err != nil {
		t.Fatal(err)
	}
	m.AllowN(ctx, "a", ls, 1, nil)
	if len(heard) < 6 {
		t.Fatalf("the Observer heard %d events, want at least 6", len(heard))
	}
	for _, e := range heard {
		if e.Duration != 0 {
			t.Errorf("%s %s on the memory store was timed: %v", e.Policy, e.Op, e.Duration)
		}
	}
}

// A Settle's shortfall is part of the reserved request, not a decision of
// its own: the Observer hears the Reserve, and no admission or refusal of
// the charges Settle makes (a refusal nobody saw would count as denied).
func TestSettleIsNotObservedAsDecisions(t *testing.T) {
	for name, s := range map[string]store.Store{"memory": memory.New(nil), "behind a guard": guard.NewBreaker(memory.New(nil), nil).Store()} {
		t.Run(name, func(t *testing.T) {
			var heard []core.Event
			l, err := core.New(core.Config{Policy: core.PerMinute("api", 10), Algorithm: algorithm.FixedWindow{}, Store: s,
				Observer: func(e core.Event) { heard = append(heard, e) }})
			if err != nil {
				t.Fatal(err)
			}
			_, r, err := l.Reserve(context.Background(), "a", 5, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.Settle(context.Background(), 12)
			if err != nil || st.Charged != 5 || st.Uncharged != 2 {
				t.Fatalf("Settle(12) of a reservation of 5 under 10: %+v, %v; want 5 charged, 2 not", st, err)
			}
			if len(heard) != 1 || !heard[0].Decision.Allowed {
				t.Fatalf("the Observer heard %+v; want the one admitted Reserve", heard)
			}
		})
	}
}
