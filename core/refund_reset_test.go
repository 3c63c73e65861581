package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// gatedRefunds holds each refund's update at a gate, as a slow connection
// would hold the request on its way.
type gatedRefunds struct {
	*memory.Store
	entered chan struct{} // closed when the first refund reaches the gate
	open    chan struct{}
	once    sync.Once
}

func (g *gatedRefunds) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	if fmt.Sprintf("%T", m) == "*core.refundMutation" {
		g.once.Do(func() { close(g.entered) })
		<-g.open
	}
	return g.Store.Update(ctx, k, m)
}

// chargedBehindAGate is a Limiter of 5 an hour (fixed window) over a store
// whose refunds wait at a gate, and the receipt of a charge of n to id.
func chargedBehindAGate(t *testing.T, timeout time.Duration, id string, n int64) (*gatedRefunds, *core.Limiter, *core.Receipt) {
	t.Helper()
	s := &gatedRefunds{Store: memory.New(nil), entered: make(chan struct{}), open: make(chan struct{})}
	t.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{Policy: core.Policy{Name: "fw", Limit: 5, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: s, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := l.Charge(context.Background(), id, n)
	if err != nil || rc == nil {
		t.Fatalf("Charge: %v %v", rc, err)
	}
	return s, l, rc
}

// A refund already on its way when Reset runs must not land in the state
// after the Reset, where later charges took the units: Reset waits for it
// (it lands before the delete), and the identity gets exactly its fresh
// quota.
func TestRefundInFlightDuringResetLandsBeforeIt(t *testing.T) {
	s, l, rc := chargedBehindAGate(t, 5*time.Second, "id", 5)
	ctx := context.Background()
	refunded := make(chan error, 1)
	go func() { _, err := rc.Refund(ctx, 1); refunded <- err }()
	<-s.entered
	reset := make(chan error, 1)
	go func() { reset <- l.Reset(ctx, "id") }()
	time.AfterFunc(20*time.Millisecond, func() { close(s.open) })
	if err := <-reset; err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 6 {
		if d, err := l.Allow(ctx, "id"); err == nil && d.Allowed {
			admitted++
		}
	}
	<-refunded
	if d, err := l.Allow(ctx, "id"); err == nil && d.Allowed {
		admitted++
	}
	if admitted != 5 {
		t.Errorf("after the Reset, %d admitted under a limit of 5: the refund landed in the fresh state", admitted)
	}
}

// A Receipt that Charge did not make refunds nothing, without a panic.
func TestZeroReceiptRefundsNothing(t *testing.T) {
	var rc core.Receipt
	if k, err := rc.Refund(context.Background(), 1); k != 0 || err == nil {
		t.Errorf("Refund of a zero Receipt: %d, %v; want nothing and an error", k, err)
	}
}

// Reset waits for a refund on its way within its own deadline, not
// longer: behind a refund that a stalled store holds, it returns its
// context's error.
func TestResetBehindAStalledRefundKeepsItsDeadline(t *testing.T) {
	s, l, stuck := chargedBehindAGate(t, -1, "a", 1)
	defer close(s.open)
	ctx := context.Background()
	go func() { _, _ = stuck.Refund(ctx, 1) }()
	<-s.entered
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	reset := make(chan error, 1)
	go func() { reset <- l.Reset(short, "b") }()
	select {
	case err := <-reset:
		if err == nil {
			t.Error("Reset behind a stalled refund returned nil, want its deadline's error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Reset with a 100 ms deadline had not returned after 2 s behind a stalled refund")
	}
}

// Reset waits only for the refunds on their way when it is called: refunds
// of other receipts, made after it, never keep it waiting, however many.
func TestResetIsNotStarvedByLaterRefunds(t *testing.T) {
	l, err := core.New(core.Config{Policy: core.Policy{Name: "p", Limit: 1_000_000, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			for {
				_, rc, err := l.Charge(ctx, id, 100)
				if err != nil || rc == nil {
					return
				}
				for range 100 {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = rc.Refund(ctx, 1)
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)
	time.Sleep(20 * time.Millisecond)
	for i := range 5 {
		short, cancel := context.WithTimeout(ctx, time.Second)
		err := l.Reset(short, "victim")
		cancel()
		if err != nil {
			t.Fatalf("Reset %d amid other identities' refunds: %v", i, err)
		}
	}
}

// A charge made while Reset waits for a refund on its way is deleted with
// the rest, so its receipt is void too: refunding it must not credit the
// state after the Reset.
func TestChargeDuringResetsWaitRefundsNothing(t *testing.T) {
	s, l, first := chargedBehindAGate(t, 5*time.Second, "id", 1)
	ctx := context.Background()
	go func() { _, _ = first.Refund(ctx, 1) }()
	<-s.entered
	reset := make(chan error, 1)
	go func() { reset <- l.Reset(ctx, "id") }()
	time.Sleep(20 * time.Millisecond) // Reset is waiting for the refund
	_, during, err := l.Charge(ctx, "id", 4)
	if err != nil || during == nil {
		t.Fatalf("Charge while Reset waits: %v %v", during, err)
	}
	close(s.open)
	if err := <-reset; err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 5 { // the fresh quota
		if d, err := l.Allow(ctx, "id"); err == nil && d.Allowed {
			admitted++
		}
	}
	if k, err := during.Refund(ctx, 4); k != 0 || err == nil {
		t.Errorf("a charge made while Reset waited, and deleted by it, refunded %d (%v); want nothing", k, err)
	}
	if d, err := l.Allow(ctx, "id"); err == nil && d.Allowed {
		admitted++
	}
	if admitted != 5 {
		t.Errorf("%d admitted after the Reset under a limit of 5", admitted)
	}
}

// slowDelete is a memory store whose delete takes a while on its way, as a
// DEL on the wire does; deleting is closed when the first one starts.
type slowDelete struct {
	*memory.Store
	deleting chan struct{}
	once     sync.Once
}

func (s *slowDelete) Delete(ctx context.Context, k store.Key) error {
	s.once.Do(func() { close(s.deleting) })
	time.Sleep(50 * time.Millisecond)
	return s.Store.Delete(ctx, k)
}

// A charge that lands while Reset's delete is on its way is taken by the
// delete, so its receipt is void too, on a Limiter and on a Multi, and a
// Reservation made then refunds nothing when settled: 5 admitted after the
// Reset under a limit of 5, never 6.
func TestChargeDuringResetsDeleteRefundsNothing(t *testing.T) {
	ctx := context.Background()
	fixed := core.Policy{Name: "fw", Limit: 5, Window: time.Hour}
	newStore := func() *slowDelete {
		s := &slowDelete{Store: memory.New(nil), deleting: make(chan struct{})}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	limiter := func(t *testing.T) (*slowDelete, *core.Limiter) {
		s := newStore()
		l, err := core.New(core.Config{Policy: fixed, Algorithm: algorithm.FixedWindow{}, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		return s, l
	}
	check := func(t *testing.T, allow func() bool, refund func() int64) {
		t.Helper()
		admitted := 0
		for range 5 {
			if allow() {
				admitted++
			}
		}
		if k := refund(); k != 0 {
			t.Errorf("a charge taken by the Reset's delete refunded %d", k)
		}
		if allow() {
			admitted++
		}
		if admitted != 5 {
			t.Errorf("%d admitted after the Reset under a limit of 5", admitted)
		}
	}
	allowed := func(l *core.Limiter) func() bool {
		return func() bool { d, err := l.Allow(ctx, "id"); return err == nil && d.Allowed }
	}

	t.Run("Limiter", func(t *testing.T) {
		s, l := limiter(t)
		reset := make(chan error, 1)
		go func() { reset <- l.Reset(ctx, "id") }()
		<-s.deleting
		_, rc, err := l.Charge(ctx, "id", 1)
		if err != nil || rc == nil {
			t.Fatalf("Charge during the delete: %v %v", rc, err)
		}
		if err := <-reset; err != nil {
			t.Fatal(err)
		}
		check(t, allowed(l), func() int64 { k, _ := rc.Refund(ctx, 1); return k })
	})
	t.Run("Reservation", func(t *testing.T) {
		s, l := limiter(t)
		reset := make(chan error, 1)
		go func() { reset <- l.Reset(ctx, "id") }()
		<-s.deleting
		_, res, err := l.Reserve(ctx, "id", 3, 0)
		if err != nil || res == nil {
			t.Fatalf("Reserve during the delete: %v %v", res, err)
		}
		if err := <-reset; err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for range 5 {
			if allowed(l)() {
				admitted++
			}
		}
		if st, err := res.Settle(ctx, 0); err != nil || st.Refunded != 0 {
			t.Errorf("Settle(0) of a reservation taken by the delete: %+v, %v; want nothing refunded", st, err)
		}
		if allowed(l)() {
			admitted++
		}
		if admitted != 5 {
			t.Errorf("%d admitted after the Reset under a limit of 5", admitted)
		}
	})
	t.Run("Multi", func(t *testing.T) {
		s := newStore()
		m, err := core.NewMulti(core.MultiConfig{Name: "m", Store: s})
		if err != nil {
			t.Fatal(err)
		}
		limits := core.MustLimits(core.Limit{Policy: fixed, Algorithm: algorithm.FixedWindow{}})
		reset := make(chan error, 1)
		go func() { reset <- m.Reset(ctx, "id", limits) }()
		<-s.deleting
		_, _, rc, err := m.Charge(ctx, "id", limits, 1, nil)
		if err != nil || rc == nil {
			t.Fatalf("Charge during the delete: %v %v", rc, err)
		}
		if err := <-reset; err != nil {
			t.Fatal(err)
		}
		check(t, func() bool { d, _, err := m.Allow(ctx, "id", limits, nil); return err == nil && d.Allowed },
			func() int64 { k, _ := rc.Refund(ctx, 1); return k })
	})
}
