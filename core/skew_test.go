package core

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// stamp is a minimal algorithm with a time in its state: it admits once at
// or after the stored time, then stores now + Window, and it clamps
// (Clamper) a stored time more than skew beyond now + Window.
type stamp struct{}

func (stamp) Name() string          { return "stamp" }
func (stamp) Quota(p *Policy) int64 { return 1 }
func (stamp) Step(state []byte, now, n int64, p *Policy) ([]byte, time.Duration, Decision) {
	if len(state) == 8 {
		if at := int64(binary.BigEndian.Uint64(state)); at > now {
			return nil, 0, Decision{Limit: 1, RetryAfter: Micros(at - now)}
		}
	}
	return binary.BigEndian.AppendUint64(nil, uint64(now+p.WindowMicros())), p.Window, Decision{Allowed: true, Limit: 1}
}

func (stamp) Clamp(state []byte, now, skew int64, p *Policy) ([]byte, time.Duration, bool) {
	bound := now + p.WindowMicros() + skew
	if len(state) != 8 || int64(binary.BigEndian.Uint64(state)) <= bound {
		return state, 0, false
	}
	binary.BigEndian.PutUint64(state, uint64(bound))
	return state, Micros(bound - now), true
}

// skewStore is mapStore declaring a clock skew (ClockSkewer).
type skewStore struct{ *mapStore }

func (skewStore) ClockSkew() time.Duration { return time.Second }

// TestLimiterClampsForDeclaredSkew: over a store that declares its skew,
// a state written by a clock an hour ahead is clamped and written back, so
// a correct limiter waits the window plus the skew, not the hour; over a
// store that declares none, nothing is clamped.
func TestLimiterClampsForDeclaredSkew(t *testing.T) {
	p := Policy{Name: "p", Limit: 1, Window: time.Minute}
	t0 := time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		store   store.Store
		clamped bool
	}{
		{"declared", skewStore{newMapStore()}, true},
		{"undeclared", newMapStore(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			right := NewManualClock(t0)
			fast, _ := New(Config{Policy: p, Algorithm: stamp{}, Store: tc.store, Clock: NewManualClock(t0.Add(time.Hour))})
			slow, _ := New(Config{Policy: p, Algorithm: stamp{}, Store: tc.store, Clock: right})
			ctx := context.Background()
			if d, err := fast.Allow(ctx, "id"); err != nil || !d.Allowed {
				t.Fatalf("fast Allow = %+v, %v", d, err)
			}
			d, err := slow.Allow(ctx, "id")
			if err != nil || d.Allowed {
				t.Fatalf("correct Allow right after = %+v, %v; want a denial", d, err)
			}
			if want := p.Window + time.Second; tc.clamped && d.RetryAfter != want {
				t.Errorf("RetryAfter = %v, want %v (the window plus the skew)", d.RetryAfter, want)
			}
			right.Advance(p.Window + time.Second)
			d, err = slow.Allow(ctx, "id")
			if err != nil || d.Allowed != tc.clamped {
				t.Fatalf("correct Allow a window and the skew later = %+v, %v; want Allowed %v", d, err, tc.clamped)
			}
		})
	}
}

// stampLeaser is slots with stamp's clamp, to see that WithClockSkew keeps a
// Leaser a Leaser.
type stampLeaser struct{ slots }

func (stampLeaser) Clamp(state []byte, now, skew int64, p *Policy) ([]byte, time.Duration, bool) {
	return state, 0, false
}

func TestWithClockSkewKeepsLeasers(t *testing.T) {
	if _, ok := WithClockSkew(stampLeaser{}, time.Second).(Leaser); !ok {
		t.Errorf("WithClockSkew of a Leaser is not a Leaser")
	}
	if got := WithClockSkew(counter{}, time.Second); got != (counter{}) {
		t.Errorf("WithClockSkew of an algorithm that cannot clamp = %T, want it unchanged", got)
	}
	if got := WithClockSkew(stamp{}, -1); got != (stamp{}) {
		t.Errorf("WithClockSkew with a negative skew = %T, want it unchanged", got)
	}
}
