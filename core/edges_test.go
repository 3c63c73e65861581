package core_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// downStore is a store whose every call fails.
type downStore struct{}

func (downStore) Update(context.Context, store.Key, store.Mutation) error {
	return &store.Error{Op: "update", Err: errors.New("connection refused")}
}

// A Multi that fails open admits with a nil error, as a Limiter does: a
// caller that checks the error first must not refuse what the failure
// policy admitted.
func TestMultiFailOpenReturnsNoError(t *testing.T) {
	m, err := core.NewMulti(core.MultiConfig{Name: "m", Store: downStore{}, Failure: core.FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	ls := core.MustLimits(core.Limit{Policy: core.Policy{Name: "p", Limit: 4, Window: time.Second}, Algorithm: algorithm.GCRA{}})
	d, states, err := m.Allow(context.Background(), "id", ls, nil)
	if err != nil || !d.Allowed || !d.Degraded || len(states) != 1 {
		t.Fatalf("Allow: %+v, %d states, %v; want a degraded admission with a nil error", d, len(states), err)
	}
	d, _, r, err := m.Charge(context.Background(), "id", ls, 1, nil)
	if err != nil || !d.Allowed || !d.Degraded || r != nil {
		t.Fatalf("Charge: %+v, receipt %v, %v; want a degraded admission, no receipt, a nil error", d, r, err)
	}
	// The Decision is the most constraining limit's: the smallest quota.
	two := core.MustLimits(
		core.Limit{Policy: core.Policy{Name: "day", Limit: 10000, Window: 24 * time.Hour}, Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "second", Limit: 20, Window: time.Second}, Algorithm: algorithm.GCRA{}},
	)
	if d, _, err := m.Allow(context.Background(), "id", two, nil); err != nil || d.Limit != 20 {
		t.Errorf("a degraded admission under limits of 10000 and 20: Limit %d (%v); want 20, the most constraining", d.Limit, err)
	}
}

// A cost the primary's quota allows but the fallback's does not is refused
// by the fallback (a degraded refusal), not turned into an input error.
func TestFallbackRefusesACostAboveItsQuota(t *testing.T) {
	fb, err := core.New(core.Config{Policy: core.PerSecond("fb", 2), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := core.New(core.Config{Policy: core.PerSecond("p", 4), Algorithm: algorithm.GCRA{}, Store: downStore{}, Failure: core.FailFallback, Fallback: fb})
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.AllowN(context.Background(), "id", 3)
	if err != nil || d.Allowed || !d.Degraded {
		t.Fatalf("AllowN(3) with a fallback of quota 2: %+v, %v; want a degraded refusal", d, err)
	}
	if d, err := l.AllowN(context.Background(), "id", 2); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("AllowN(2): %+v, %v; want the fallback's degraded admission", d, err)
	}
}

// A Limits not built by NewLimits is bad input, not a panic.
func TestMultiZeroLimits(t *testing.T) {
	m, err := core.NewMulti(core.MultiConfig{Name: "m", Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Allow(context.Background(), "id", &core.Limits{}, nil); !errors.Is(err, core.ErrInvalidInput) {
		t.Fatalf("Allow with an empty Limits: %v; want ErrInvalidInput", err)
	}
	if _, _, _, err := m.Charge(context.Background(), "id", &core.Limits{}, 1, nil); !errors.Is(err, core.ErrInvalidInput) {
		t.Fatalf("Charge with an empty Limits: %v; want ErrInvalidInput", err)
	}
	if err := m.Reset(context.Background(), "id", &core.Limits{}); !errors.Is(err, core.ErrInvalidInput) {
		t.Fatalf("Reset with an empty Limits: %v; want ErrInvalidInput", err)
	}
}

// A pool's Share must count under its own keys, not the Base's.
func TestPoolShareMustDifferFromBase(t *testing.T) {
	s := memory.New(nil)
	newL := func(name string) *core.Limiter {
		l, err := core.New(core.Config{Policy: core.PerSecond(name, 5), Algorithm: algorithm.GCRA{}, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	base, pool := newL("base"), newL("pool")
	if _, err := core.NewPool(core.PoolConfig{Base: base, Share: base, Pool: pool}); !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("NewPool with Share == Base: %v; want ErrInvalidPolicy", err)
	}
	if _, err := core.NewPool(core.PoolConfig{Base: base, Share: newL("base"), Pool: pool}); !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("NewPool with a Share of Base's name: %v; want ErrInvalidPolicy", err)
	}
	if _, err := core.NewPool(core.PoolConfig{BaseFor: func(string) *core.Limiter { return base }, Share: newL("share"), Pool: pool}); err != nil {
		t.Fatalf("NewPool with BaseFor: %v", err)
	}
}

// A cost above the tenant's base but within its share is drawn from the
// pool, as the doc says ("from its base, or else from the pool"), and its
// refusal tells the wait of the limit that refused it; a cost no limit of
// the pool could admit is bad input.
func TestPoolCostAboveTheBase(t *testing.T) {
	s := memory.New(nil)
	newL := func(name string, limit int64) *core.Limiter {
		l, err := core.New(core.Config{Policy: core.PerMinute(name, limit), Algorithm: algorithm.FixedWindow{}, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	p, err := core.NewPool(core.PoolConfig{Base: newL("base", 5), Share: newL("share", 8), Pool: newL("pool", 100)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := p.AllowN(ctx, "t", 6); err != nil || !d.Allowed || !d.FromPool {
		t.Fatalf("AllowN(6) with base 5 and share 8: %+v, %v; want drawn from the pool", d, err)
	}
	d, err := p.AllowN(ctx, "t", 6)
	if err != nil || d.Allowed {
		t.Fatalf("a second AllowN(6): %+v, %v; want refused (the share has 2 left)", d, err)
	}
	// The base can never admit 6: the wait is the share's, not none.
	if d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Fatalf("a second AllowN(6) was refused with RetryAfter %v; want the share's wait, within its minute", d.RetryAfter)
	}
	// The pool refuses: its wait.
	small, err := core.NewPool(core.PoolConfig{Base: newL("base", 5), Share: newL("share", 8), Pool: newL("small", 10)})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := small.AllowN(ctx, "a", 6); err != nil || !d.FromPool {
		t.Fatalf("tenant a's AllowN(6) on a pool of 10: %+v, %v; want drawn from the pool", d, err)
	}
	if d, err := small.AllowN(ctx, "b", 6); err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Fatalf("tenant b's AllowN(6) on a pool with 4 left: %+v, %v; want refused with the pool's wait, within its minute", d, err)
	}
	if _, err := p.AllowN(ctx, "t", 9); !errors.Is(err, core.ErrInvalidInput) {
		t.Fatalf("AllowN(9) above every quota but the pool's: %v; want ErrInvalidInput", err)
	}
	if _, err := p.AllowN(ctx, "", 6); !errors.Is(err, core.ErrInvalidInput) {
		t.Fatalf(`AllowN("", 6): %v; want ErrInvalidInput`, err)
	}
}

// A cost only the pool can serve, refused by the tenant's share while the
// pool is spent too, waits for both: after its RetryAfter the same request
// is admitted, as a Decision's RetryAfter promises.
func TestPoolRefusalWaitsForTheShareAndThePool(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memory.New(nil)
	newL := func(name string, limit int64, w time.Duration) *core.Limiter {
		l, err := core.New(core.Config{Policy: core.Policy{Name: name, Limit: limit, Window: w}, Algorithm: algorithm.FixedWindow{}, Store: s, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	p, err := core.NewPool(core.PoolConfig{Base: newL("base", 1, time.Hour), Share: newL("share", 3, time.Second), Pool: newL("pool", 3, 30*time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := p.AllowN(ctx, "t", 3); err != nil || !d.Allowed || !d.FromPool {
		t.Fatalf("AllowN(3) with base 1, share 3 and pool 3: %+v, %v; want drawn from the pool", d, err)
	}
	d, err := p.AllowN(ctx, "t", 3)
	if err != nil || d.Allowed {
		t.Fatalf("a second AllowN(3): %+v, %v; want refused", d, err)
	}
	if d.RetryAfter < 29*time.Second {
		t.Errorf("refused with RetryAfter %v while the pool is spent for 30 s", d.RetryAfter)
	}
	clock.Advance(d.RetryAfter)
	if d2, err := p.AllowN(ctx, "t", 3); err != nil || !d2.Allowed {
		t.Fatalf("AllowN(3) after waiting the refusal's RetryAfter %v: %+v, %v; want admitted", d.RetryAfter, d2, err)
	}
}

// On a store of one item per identity, a limit the identity's current
// limits leave out keeps its state in the item: a tier that drops the
// limit and a table that brings it back within its window do not reset
// it (a script store keeps a key per limit and never did).
func TestMultiKeepsTheStateOfALimitLeftOut(t *testing.T) {
	ctx := context.Background()
	clk := core.NewManualClock(time.Unix(1_699_999_980, 0)) // a minute's start
	m, err := core.NewMulti(core.MultiConfig{Name: "m", Store: memory.New(&memory.Options{Clock: clk, SweepInterval: -1}), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	minute := core.Limit{Policy: core.PerMinute("minute", 10), Algorithm: algorithm.FixedWindow{}}
	day := core.Limit{Policy: core.Policy{Name: "day", Limit: 1000, Window: 24 * time.Hour}, Algorithm: algorithm.FixedWindow{}}
	with, without := core.MustLimits(minute, day), core.MustLimits(day)
	for i := range 10 {
		if d, _, err := m.Allow(ctx, "u", with, nil); err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v", i, d, err)
		}
		clk.Advance(time.Second)
	}
	if d, _, err := m.Allow(ctx, "u", without, nil); err != nil || !d.Allowed {
		t.Fatalf("without the minute limit: %+v, %v; want admitted", d, err)
	}
	if d, _, err := m.Allow(ctx, "u", with, nil); err != nil || d.Allowed {
		t.Fatalf("the minute limit back within its minute: %+v, %v; want refused (10 of 10 spent)", d, err)
	}
}

// Settle's shortfall takes a bounded number of store calls, whatever the
// actual cost: a limit admits at most its quota at one instant, and a
// decision the failure policy made charged nothing on the store.
func TestSettleShortfallIsBounded(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		shadow bool
		down   bool
	}{{"shadow", true, false}, {"fail open, store down", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			cs := &countingStore{Store: memory.New(nil)}
			l, err := core.New(core.Config{Policy: core.PerSecond("p", 10), Algorithm: algorithm.GCRA{}, Store: cs, Shadow: c.shadow, Failure: core.FailOpen})
			if err != nil {
				t.Fatal(err)
			}
			_, r, err := l.Reserve(ctx, "x", 1, 0)
			if err != nil || r == nil {
				t.Fatalf("Reserve: %v, %v", r, err)
			}
			cs.down.Store(c.down)
			before := cs.calls.Load()
			s, err := r.Settle(ctx, 1_000_000_000)
			if err != nil {
				t.Fatal(err)
			}
			if n := cs.calls.Load() - before; n > 4 {
				t.Fatalf("Settle made %d store calls for its shortfall", n)
			}
			// At most two parts of a quota (in shadow mode a refused part
			// is counted as charged), the rest uncharged.
			if s.Charged > 20 || s.Charged+s.Uncharged != 1_000_000_000-1 {
				t.Fatalf("Settle: %+v; want at most two quotas charged and the rest uncharged", s)
			}
		})
	}
}

// countingStore is a store that counts its calls and fails while down.
type countingStore struct {
	store.Store
	calls atomic.Int64
	down  atomic.Bool
}

func (s *countingStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	s.calls.Add(1)
	if s.down.Load() {
		return &store.Error{Op: "update", Err: errors.New("connection refused")}
	}
	return s.Store.Update(ctx, key, m)
}

// A store variable of a concrete type that was never built is refused by
// the constructors, as a nil one is, instead of panicking at a call.
func TestTypedNilStoreIsRefused(t *testing.T) {
	var s *memory.Store
	if _, err := core.New(core.Config{Policy: core.PerSecond("p", 5), Algorithm: algorithm.GCRA{}, Store: s}); err == nil {
		t.Error("core.New took a nil *memory.Store")
	}
	if _, err := core.NewMulti(core.MultiConfig{Name: "m", Store: s}); err == nil {
		t.Error("core.NewMulti took a nil *memory.Store")
	}
}

// A fallback, pre-filter or pool limiter must be one New made, and a
// fallback must hold leases exactly when its limiter does.
func TestLimitersGivenToLimitersAreChecked(t *testing.T) {
	mem := memory.New(nil)
	rate, err := core.New(core.Config{Policy: core.PerSecond("rate", 5), Algorithm: algorithm.GCRA{}, Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	slots, err := core.New(core.Config{Policy: core.Policy{Name: "slots", Limit: 2, Window: time.Minute, LeaseTTL: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  core.Config
	}{
		{"zero fallback", core.Config{Policy: core.PerSecond("p", 5), Algorithm: algorithm.GCRA{}, Store: downStore{}, Failure: core.FailFallback, Fallback: &core.Limiter{}}},
		{"leases for a rate", core.Config{Policy: core.PerSecond("p", 5), Algorithm: algorithm.GCRA{}, Store: downStore{}, Failure: core.FailFallback, Fallback: slots}},
		{"a rate for leases", core.Config{Policy: core.Policy{Name: "p", Limit: 2, Window: time.Minute, LeaseTTL: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: downStore{}, Failure: core.FailFallback, Fallback: rate}},
		{"zero pre-filter", core.Config{Policy: core.PerSecond("p", 5), Algorithm: algorithm.GCRA{}, Store: downStore{}, PreFilter: &core.Limiter{}}},
	} {
		if _, err := core.New(c.cfg); err == nil {
			t.Errorf("%s: core.New took it", c.name)
		}
	}
	if _, err := core.NewPool(core.PoolConfig{Base: rate, Share: &core.Limiter{}, Pool: &core.Limiter{}}); err == nil {
		t.Error("NewPool took zero Limiters")
	}
}

// A Tiers that NewTiers did not make answers with an error or nothing.
func TestZeroTiers(t *testing.T) {
	var tr core.Tiers
	if n := tr.Names(); n != nil {
		t.Errorf("Names() = %v", n)
	}
	if l := tr.Tier("free"); l != nil {
		t.Errorf("Tier() = %v", l)
	}
	if _, _, err := tr.Resolve(context.Background(), "id"); err == nil {
		t.Error("Resolve succeeded")
	}
	if err := tr.Set(nil); err == nil {
		t.Error("Set succeeded")
	}
	if err := tr.Exclude("x"); err == nil {
		t.Error("Exclude succeeded")
	}
}

// TestZeroValuesAreErrors: a Limiter, Multi, Pool, Lease or Reservation
// that its constructor did not make (a zero value, a struct field never
// set) answers with an error, never a panic; so does Settle on the nil
// Reservation a refused Reserve returns.
func TestZeroValuesAreErrors(t *testing.T) {
	ctx := context.Background()
	ls, err := core.NewLimits(core.Limit{Policy: core.PerSecond("a", 1), Algorithm: algorithm.GCRA{}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		l core.Limiter
		m core.Multi
		p core.Pool
		e core.Lease
		r *core.Reservation
	)
	calls := map[string]func() error{
		"Limiter.Allow":      func() error { _, err := l.Allow(ctx, "id"); return err },
		"Limiter.Charge":     func() error { _, _, err := l.Charge(ctx, "id", 1); return err },
		"Limiter.Reserve":    func() error { _, _, err := l.Reserve(ctx, "id", 1, 0); return err },
		"Limiter.Acquire":    func() error { _, _, err := l.Acquire(ctx, "id"); return err },
		"Limiter.Reset":      func() error { return l.Reset(ctx, "id") },
		"Multi.Allow":        func() error { _, _, err := m.Allow(ctx, "id", ls, nil); return err },
		"Multi.Charge":       func() error { _, _, _, err := m.Charge(ctx, "id", ls, 1, nil); return err },
		"Multi.Reset":        func() error { return m.Reset(ctx, "id", ls) },
		"Pool.Allow":         func() error { _, err := p.Allow(ctx, "id"); return err },
		"Lease.Release":      func() error { return e.Release(ctx) },
		"Reservation.Settle": func() error { _, err := r.Settle(ctx, 1); return err },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s on a zero value panicked: %v", name, v)
				}
			}()
			if err := call(); err == nil || !strings.Contains(err.Error(), "not made by New") && !strings.Contains(err.Error(), "not returned by") && !errors.Is(err, core.ErrNoReservation) {
				t.Errorf("%s on a zero value: %v; want an error naming its constructor", name, err)
			}
		}()
	}
	if n := r.Estimate(); n != 0 {
		t.Errorf("a nil Reservation's Estimate() = %d", n)
	}
	// A refused Reserve returns a nil Reservation: settling it is an
	// error, as the deferred Settle of a caller that did not check would be.
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "r", Limit: 1, Window: time.Hour}, Algorithm: algorithm.GCRA{}, Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lim.Reserve(ctx, "id", 1, 0); err != nil {
		t.Fatal(err)
	}
	d, res, err := lim.Reserve(ctx, "id", 1, 0)
	if err != nil || d.Allowed || res != nil {
		t.Fatalf("second Reserve: %+v, %v, %v; want a refusal and no reservation", d, res, err)
	}
	if _, err := res.Settle(ctx, 1); !errors.Is(err, core.ErrNoReservation) {
		t.Errorf("Settle on a refused reservation: %v, want ErrNoReservation", err)
	}
}

// A typed-nil Algorithm (a nil *algorithm.GCRA in an interface) is an
// error of the constructor that takes it, as a typed-nil Store is, never a
// panic there or at the first decision.
func TestTypedNilAlgorithmIsAnError(t *testing.T) {
	var gcra *algorithm.GCRA
	var cal *algorithm.Calendar
	for _, alg := range []core.Algorithm{gcra, cal} {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%T: a constructor panicked: %v", alg, v)
				}
			}()
			if _, err := core.New(core.Config{Policy: core.PerSecond("p", 1), Algorithm: alg, Store: memory.New(nil)}); err == nil {
				t.Errorf("New took a nil %T", alg)
			}
			if _, err := core.NewLimits(core.Limit{Policy: core.PerSecond("p", 1), Algorithm: alg}); !errors.Is(err, core.ErrInvalidPolicy) {
				t.Errorf("NewLimits with a nil %T: %v; want ErrInvalidPolicy", alg, err)
			}
			if _, err := core.NewTiers(map[string][]core.Limit{"free": {{Policy: core.PerSecond("p", 1), Algorithm: alg}}}, "free", nil); err == nil {
				t.Errorf("NewTiers took a nil %T", alg)
			}
		}()
	}
}

// A Reset gives an identity's quota back by hand; a receipt of a charge
// made before it must not then give its units into the state after it,
// where later charges took them: a refund after a Reset of the same
// Limiter (or Multi) refunds nothing, and the window holds its limit.
func TestRefundAfterResetGivesNothing(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []core.Algorithm{algorithm.FixedWindow{}, algorithm.GCRA{}, algorithm.SlidingCounter{}, algorithm.TokenBucket{}} {
		l, err := core.New(core.Config{Policy: core.Policy{Name: "r", Limit: 10, Window: time.Hour}, Algorithm: alg, Store: memory.New(nil)})
		if err != nil {
			t.Fatal(err)
		}
		_, rc, err := l.Charge(ctx, "id", 5)
		if err != nil || rc == nil {
			t.Fatalf("%s: Charge: %v, %v", alg.Name(), rc, err)
		}
		if err := l.Reset(ctx, "id"); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if d, err := l.Allow(ctx, "id"); err != nil || !d.Allowed {
				t.Fatalf("%s: after Reset, call %d: %+v, %v", alg.Name(), i, d, err)
			}
		}
		if k, err := rc.Refund(ctx, 5); k != 0 || !errors.Is(err, core.ErrNotRefunded) {
			t.Errorf("%s: a refund from before the Reset gave back %d (%v); want ErrNotRefunded", alg.Name(), k, err)
		}
		if d, _ := l.Allow(ctx, "id"); d.Allowed {
			t.Errorf("%s: an 11th admission under a limit of 10 after the Reset", alg.Name())
		}
	}
	m, err := core.NewMulti(core.MultiConfig{Name: "rm", Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ls := core.MustLimits(core.Limit{Policy: core.Policy{Name: "w", Limit: 10, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}})
	_, _, rc, err := m.Charge(ctx, "id", ls, 5, nil)
	if err != nil || rc == nil {
		t.Fatalf("Multi.Charge: %v, %v", rc, err)
	}
	if err := m.Reset(ctx, "id", ls); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		m.Allow(ctx, "id", ls, nil)
	}
	if k, err := rc.Refund(ctx, 5); k != 0 || !errors.Is(err, core.ErrNotRefunded) {
		t.Errorf("Multi: a refund from before the Reset gave back %d (%v); want ErrNotRefunded", k, err)
	}
}

// A refund of n <= 0 is bad input, as a cost n <= 0 is everywhere else:
// ErrInvalidInput, and the receipt keeps its units.
func TestRefundOfNoUnitsIsBadInput(t *testing.T) {
	l, err := core.New(core.Config{Policy: core.PerMinute("r", 10), Algorithm: algorithm.FixedWindow{}, Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, rc, err := l.Charge(ctx, "u", 3)
	if err != nil || rc == nil {
		t.Fatalf("Charge(3): %v, receipt %v", err, rc)
	}
	for _, n := range []int64{0, -5} {
		if k, err := rc.Refund(ctx, n); k != 0 || !errors.Is(err, core.ErrInvalidInput) {
			t.Errorf("Refund(%d) gave back %d (%v); want ErrInvalidInput", n, k, err)
		}
	}
	if k, err := rc.Refund(ctx, 3); k != 3 || err != nil {
		t.Errorf("Refund(3) after the bad ones gave back %d (%v); want all 3", k, err)
	}
}
