package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A refund gives units back to the store; this Limiter's deny cache must
// not go on refusing what the store would now admit (it refuses only what
// the store would).
func TestDenyCacheForgetsARefusalWhenARefundFreesUnits(t *testing.T) {
	ctx := context.Background()
	l, err := core.New(core.Config{
		Policy: core.Policy{Name: "api", Limit: 2, Window: time.Minute}, Algorithm: algorithm.FixedWindow{},
		Store: newRemote(t), DenyCache: &core.DenyCacheOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := l.Charge(ctx, "a", 2)
	if err != nil || rc == nil {
		t.Fatalf("Charge: %v, receipt %v", err, rc)
	}
	if d, _ := l.Allow(ctx, "a"); d.Allowed {
		t.Fatal("admitted past the limit")
	}
	if k, err := rc.Refund(ctx, 2); err != nil || k != 2 {
		t.Fatalf("Refund: %d, %v; want 2", k, err)
	}
	if d, err := l.Allow(ctx, "a"); err != nil || !d.Allowed {
		t.Fatalf("after the refund: %+v, %v; want the store's admission", d, err)
	}

	// Settling a reservation below its estimate refunds too.
	_, res, err := l.Reserve(ctx, "b", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(ctx, "b"); d.Allowed {
		t.Fatal("admitted past the limit")
	}
	if s, err := res.Settle(ctx, 1); err != nil || s.Refunded != 1 {
		t.Fatalf("Settle: %+v, %v; want 1 refunded", s, err)
	}
	if d, err := l.Allow(ctx, "b"); err != nil || !d.Allowed {
		t.Fatalf("after the settlement: %+v, %v; want the store's admission", d, err)
	}
}

// A refusal the store decided before a refund landed, and whose reply was
// still on its way, is not held after the refund.
func TestDenyCacheDoesNotHoldARefusalARefundOvertook(t *testing.T) {
	ctx := context.Background()
	s := newRemote(t)
	l, err := core.New(core.Config{
		Policy: core.Policy{Name: "api", Limit: 2, Window: time.Minute}, Algorithm: algorithm.FixedWindow{},
		Store: s, DenyCache: &core.DenyCacheOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := l.Charge(ctx, "a", 2)
	if err != nil || rc == nil {
		t.Fatalf("Charge: %v, receipt %v", err, rc)
	}
	s.held, s.released = make(chan struct{}), make(chan struct{})
	done := make(chan core.Decision)
	go func() { d, _ := l.Allow(ctx, "a"); done <- d }()
	<-s.held // refused by the store, the reply held
	s.held = nil
	if k, err := rc.Refund(ctx, 2); err != nil || k != 2 {
		t.Fatalf("Refund: %d, %v; want 2", k, err)
	}
	close(s.released)
	if d := <-done; d.Allowed {
		t.Fatal("the held request was admitted")
	}
	if d, err := l.Allow(ctx, "a"); err != nil || !d.Allowed {
		t.Fatalf("after the refund: %+v, %v; want the store's admission, not the refusal the refund overtook", d, err)
	}
}

// Charge, which the doors use for every layer that a later one may still
// refuse, is guarded as AllowN is: a refusal held in the deny cache, or
// one the pre-filter makes, costs no store call, and the store's refusals
// are held.
func TestChargeConsultsTheDenyCacheAndThePreFilter(t *testing.T) {
	ctx := context.Background()
	s := newRemote(t)
	pre := memory.New(nil)
	t.Cleanup(func() { _ = pre.Close() })
	pf, err := core.New(core.Config{Policy: core.Policy{Name: "api", Limit: 1, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: pre})
	if err != nil {
		t.Fatal(err)
	}
	l, err := core.New(core.Config{
		Policy: core.Policy{Name: "api", Limit: 2, Window: time.Minute}, Algorithm: algorithm.FixedWindow{},
		Store: s, DenyCache: &core.DenyCacheOptions{}, PreFilter: pf,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, rc, err := l.Charge(ctx, "a", 2); err != nil || rc == nil {
		t.Fatalf("Charge: %v, receipt %v", err, rc)
	}
	s.calls.Store(0)
	if d, rc, err := l.Charge(ctx, "a", 1); err != nil || d.Allowed || rc != nil {
		t.Fatalf("over the limit: %+v, receipt %v, %v; want the store's refusal", d, rc, err)
	}
	for i := range 10 {
		if d, rc, err := l.Charge(ctx, "a", 1); err != nil || d.Allowed || rc != nil || d.RetryAfter <= 0 {
			t.Fatalf("flood charge %d: %+v, receipt %v, %v; want refused with a RetryAfter", i, d, rc, err)
		}
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("the store was asked %d times, want once: the deny cache holds the first refusal", n)
	}

	// The pre-filter admits 1 a minute here, the store 2: a second charge
	// of "b" is refused without the store.
	s.calls.Store(0)
	if _, rc, err := l.Charge(ctx, "b", 1); err != nil || rc == nil {
		t.Fatalf("charge of b: %v, receipt %v", err, rc)
	}
	if d, rc, err := l.Charge(ctx, "b", 1); err != nil || d.Allowed || rc != nil || d.Limit != 2 {
		t.Fatalf("2nd charge of b: %+v, receipt %v, %v; want the pre-filter's refusal, with the limiter's Limit", d, rc, err)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("two charges of b asked the store %d times, want once: the pre-filter's refusal costs none", n)
	}
	// A refund gives the pre-filter its unit back too: else it would go
	// on refusing what the store, refunded, admits.
	_, rc, err := l.Charge(ctx, "c", 1)
	if err != nil || rc == nil {
		t.Fatalf("charge of c: %v, receipt %v", err, rc)
	}
	if k, err := rc.Refund(ctx, 1); err != nil || k != 1 {
		t.Fatalf("Refund: %d, %v; want 1", k, err)
	}
	if d, rc, err := l.Charge(ctx, "c", 1); err != nil || !d.Allowed || rc == nil {
		t.Fatalf("charge of c after its refund: %+v, receipt %v, %v; want admitted", d, rc, err)
	}
}
