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

// A shadow leaky bucket never shapes traffic: what it would have queued is
// admitted with no Delay, as what it would have refused is, on every path
// (the in-process fast path, a Limiter's Clock, a store behind a breaker).
func TestShadowLeakyBucketDelaysNothing(t *testing.T) {
	p := core.Policy{Name: "dark", Limit: 10, Window: time.Second, Burst: 1, MaxDelay: time.Second}
	for name, mk := range map[string]func() (store.Store, core.Clock){
		"memory":         func() (store.Store, core.Clock) { return memory.New(nil), nil },
		"memory, Clock":  func() (store.Store, core.Clock) { return memory.New(nil), core.NewManualClock(time.Unix(1e9, 0)) },
		"behind a guard": func() (store.Store, core.Clock) { return guard.NewBreaker(memory.New(nil), nil).Store(), nil },
	} {
		t.Run(name, func(t *testing.T) {
			s, clock := mk()
			var heard []core.Event
			l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.LeakyBucket{}, Store: s, Clock: clock, Shadow: true,
				Observer: func(e core.Event) { heard = append(heard, e) }})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 15 {
				d, err := l.Allow(context.Background(), "k")
				if err != nil || !d.Allowed || d.Delay != 0 || d.RetryAfter != 0 {
					t.Fatalf("call %d to a shadow leaky bucket: %+v, %v; want an admission with no Delay", i, d, err)
				}
			}
			if len(heard) != 15 {
				t.Fatalf("the Observer heard %d events, want 15", len(heard))
			}
		})
	}
}
