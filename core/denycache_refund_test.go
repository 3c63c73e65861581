package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
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
