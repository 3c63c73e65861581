package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

func reserveLimiter(t *testing.T, clock core.Clock, limit int64) *core.Limiter {
	t.Helper()
	s := memory.New(&memory.Options{Clock: clock})
	t.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{Policy: core.PerMinute("tokens", limit), Algorithm: algorithm.FixedWindow{}, Store: s, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// remaining is what a fresh probe of one unit reports left, after it.
func remaining(t *testing.T, l *core.Limiter, id string) int64 {
	t.Helper()
	d, err := l.Allow(context.Background(), id)
	if err != nil || !d.Allowed {
		t.Fatalf("probe: %+v %v", d, err)
	}
	return d.Remaining + 1
}

func TestReserveSettle(t *testing.T) {
	ctx := context.Background()
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))

	l := reserveLimiter(t, clock, 1000)
	_, r, err := l.Reserve(ctx, "llm", 300, 0)
	if err != nil || r == nil {
		t.Fatalf("Reserve: %v", err)
	}
	s, err := r.Settle(ctx, 120)
	if err != nil || s.Refunded != 180 || s.Charged != 0 || s.Uncharged != 0 {
		t.Fatalf("settle below the estimate: %+v %v, want 180 refunded", s, err)
	}
	if got := remaining(t, l, "llm"); got != 880 {
		t.Fatalf("after settling 120 of 300: %d left, want 880", got)
	}
	if _, err := r.Settle(ctx, 10); !errors.Is(err, core.ErrReservationSettled) {
		t.Fatalf("second Settle: %v, want ErrReservationSettled", err)
	}

	// Above the estimate: the shortfall as far as the limit allows.
	l = reserveLimiter(t, clock, 100)
	_, r, _ = l.Reserve(ctx, "llm", 60, 0)
	s, err = r.Settle(ctx, 130)
	if err != nil || s.Charged != 40 || s.Uncharged != 30 {
		t.Fatalf("settle 130 of an estimate 60 under 100/min: %+v %v, want 40 charged, 30 uncharged", s, err)
	}

	// An unsettled reservation stands at its estimate after its timeout.
	l = reserveLimiter(t, clock, 100)
	_, r, _ = l.Reserve(ctx, "crash", 70, time.Nanosecond)
	time.Sleep(time.Millisecond)
	if _, err := r.Settle(ctx, 1); !errors.Is(err, core.ErrReservationSettled) {
		t.Fatalf("Settle after the timeout: %v, want ErrReservationSettled", err)
	}
	if got := remaining(t, l, "crash"); got != 30 {
		t.Fatalf("after a reservation of 70 left unsettled: %d left, want 30", got)
	}

	// A refused estimate reserves nothing.
	if d, r, err := l.Reserve(ctx, "crash", 50, 0); err != nil || d.Allowed || r != nil {
		t.Fatalf("estimate above what is left: %+v %v %v, want refused, no reservation", d, r, err)
	}
	if _, _, err := l.Reserve(ctx, "x", 0, 0); !errors.Is(err, core.ErrInvalidInput) {
		t.Fatalf("estimate 0: %v, want ErrInvalidInput", err)
	}
}

// A negative actual is invalid input, settles nothing, and leaves the
// reservation to be settled (as Settle's doc says).
func TestSettleNegative(t *testing.T) {
	ctx := context.Background()
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	l := reserveLimiter(t, clock, 10)
	_, r, err := l.Reserve(ctx, "llm", 5, 0)
	if err != nil || r == nil {
		t.Fatalf("Reserve: %v", err)
	}
	if s, err := r.Settle(ctx, -5); !errors.Is(err, core.ErrInvalidInput) || s != (core.Settlement{}) {
		t.Fatalf("Settle(-5): %+v %v, want nothing settled and ErrInvalidInput", s, err)
	}
	if s, err := r.Settle(ctx, 2); err != nil || s.Refunded != 3 {
		t.Fatalf("Settle(2) after Settle(-5): %+v %v, want 3 refunded", s, err)
	}
	if got := remaining(t, l, "llm"); got != 8 {
		t.Fatalf("after settling 2 of 5: %d left, want 8", got)
	}
}
