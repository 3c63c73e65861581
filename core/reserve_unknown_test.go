package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A shortfall whose charge may have landed (its outcome unknown: the
// store may have run it after the deadline) is neither Charged nor
// Uncharged, which a caller bills or logs: it is Unknown. So under
// FailOpen, where the failure policy then decided.
func TestSettleShortfallOfUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []FailureMode{FailClosed, FailOpen} {
		s := &lossyStore{mapStore: newMapStore()}
		l := newTestLimiter(t, Config{Store: s, Policy: Policy{Name: "tokens", Limit: 10, Window: time.Hour}, Failure: mode})
		_, r, err := l.Reserve(ctx, "k", 2, 0)
		if err != nil || r == nil {
			t.Fatalf("%v: Reserve: %v", mode, err)
		}
		s.lostTakes.Store(1)
		st, err := r.Settle(ctx, 6)
		if mode == FailClosed && !errors.Is(err, ErrOutcomeUnknown) || mode == FailOpen && err != nil {
			t.Fatalf("%v: Settle(6) of 2 with its charge's reply lost: %v", mode, err)
		}
		if st.Charged != 0 || st.Uncharged != 0 || st.Unknown != 4 {
			t.Fatalf("%v: Settle(6) of 2 with its charge's reply lost: %+v; want the 4 Unknown", mode, st)
		}
		// The store did charge them.
		if d, err := l.AllowN(ctx, "k", 4); err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("%v: after the lost charge, 4 more: %+v, %v; want the last 4 of 10 admitted", mode, d, err)
		}
	}
}
