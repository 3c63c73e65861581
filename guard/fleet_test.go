package guard_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/store/memory"
)

func newFleet(t *testing.T, o *guard.FleetOptions) *guard.Fleet {
	t.Helper()
	f, err := guard.NewFleet(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func waitSize(t *testing.T, f *guard.Fleet, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.Size() != want {
		if time.Now().After(deadline) {
			t.Fatalf("fleet size %d, want %d", f.Size(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFleetCountsHeartbeatsAndKeepsTheCountDuringAnOutage(t *testing.T) {
	s := newFlaky()
	t.Cleanup(func() { _ = s.mem.Close() })
	o := &guard.FleetOptions{Store: s, Interval: 20 * time.Millisecond}
	a, b, c := newFleet(t, o), newFleet(t, o), newFleet(t, o)
	waitSize(t, a, 3)
	waitSize(t, b, 3)
	waitSize(t, c, 3)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitSize(t, a, 2) // c's heartbeat expires after 3 intervals
	waitSize(t, b, 2)
	s.set(errDown)
	time.Sleep(200 * time.Millisecond)
	if a.Size() != 2 || b.Size() != 2 {
		t.Fatalf("during the outage: sizes %d, %d; want the last count, 2", a.Size(), b.Size())
	}
}

func TestFleetOfFixedSize(t *testing.T) {
	f := newFleet(t, &guard.FleetOptions{Size: 4})
	if f.Size() != 4 {
		t.Fatalf("size %d, want 4", f.Size())
	}
	if _, err := guard.NewFleet(&guard.FleetOptions{Size: -1}); err == nil {
		t.Fatal("a negative Size was accepted")
	}
	if _, err := guard.NewFleet(&guard.FleetOptions{Name: "no spaces"}); err == nil {
		t.Fatal("a bad Name was accepted")
	}
}

func TestFleetMaxInstances(t *testing.T) {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	var fs []*guard.Fleet
	for range 5 {
		fs = append(fs, newFleet(t, &guard.FleetOptions{Store: mem, MaxInstances: 3, Interval: time.Hour}))
	}
	for _, f := range fs {
		if err := f.Beat(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := fs[4].Size(); got != 3 {
		t.Fatalf("size %d with MaxInstances 3 and 5 instances, want 3", got)
	}
}

func TestFleetFallbackEnforcesTheShare(t *testing.T) {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	f := newFleet(t, &guard.FleetOptions{Size: 4})
	fb, err := guard.FleetFallback(core.Config{Policy: core.PerMinute("api", 100), Algorithm: algorithm.FixedWindow{}, Store: mem}, f)
	if err != nil {
		t.Fatal(err)
	}
	down := newFlaky()
	down.set(errDown)
	l, err := core.New(core.Config{Policy: core.PerMinute("api", 100), Algorithm: algorithm.FixedWindow{}, Store: down, Failure: core.FailFallback, Fallback: fb})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var admitted int
	for range 200 {
		d, err := l.Allow(ctx, "a")
		if err != nil || !d.Degraded {
			t.Fatalf("%+v, %v; want the fallback's decision", d, err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 25 {
		t.Fatalf("the fallback admitted %d of 200 in a window, want 100/4 = 25", admitted)
	}
	// A cost above the share is refused, not stepped, and says the share's
	// quota; the fallback's own Quota stays the global one.
	if d, err := l.AllowN(ctx, "b", 30); err != nil || d.Allowed || d.Limit != 25 || d.RetryAfter != time.Minute {
		t.Fatalf("cost 30 over a share of 25: %+v, %v; want refused with Limit 25 and RetryAfter a window", d, err)
	}
	if q := fb.Quota(); q != 100 {
		t.Fatalf("the fallback's Quota() = %d, want the global 100", q)
	}
	if _, err := guard.FleetFallback(core.Config{Policy: core.PerMinute("api", 1), Algorithm: algorithm.Concurrency{}, Store: mem}, f); err == nil {
		t.Fatal("a concurrency fallback was accepted")
	}
}

func TestFleetFallbackFollowsTheCount(t *testing.T) {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	hb := memory.New(nil)
	t.Cleanup(func() { _ = hb.Close() })
	o := &guard.FleetOptions{Store: hb, Interval: time.Hour}
	f := newFleet(t, o)
	fb, err := guard.FleetFallback(core.Config{Policy: core.PerMinute("api", 90), Algorithm: algorithm.GCRA{}, Store: mem}, f)
	if err != nil {
		t.Fatal(err)
	}
	count := func(id string) int {
		var n int
		for range 200 {
			if d, _ := fb.Allow(context.Background(), id); d.Allowed {
				n++
			}
		}
		return n
	}
	if got := count("one"); got != 90 {
		t.Fatalf("alone: %d admitted, want 90", got)
	}
	newFleet(t, o)
	newFleet(t, o) // three instances now
	if err := f.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := count("three"); got != 30 {
		t.Fatalf("one of three: %d admitted, want 30", got)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = fb.Allow(context.Background(), "three") }); a != 0 {
		t.Fatalf("%v allocations per fallback decision, want 0", a)
	}
}

func TestPreFilterIsSizedToTheFleet(t *testing.T) {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	f := newFleet(t, &guard.FleetOptions{Size: 4})
	global := core.PerMinute("api", 100)
	pf, err := guard.PreFilter(core.Config{Policy: global, Algorithm: algorithm.FixedWindow{}, Store: mem}, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := newFlaky()
	t.Cleanup(func() { _ = s.mem.Close() })
	// The flaky store is not InProcess: the Limiter treats it as a network
	// store, and the pre-filter applies.
	l, err := core.New(core.Config{Policy: global, Algorithm: algorithm.FixedWindow{}, Store: s, PreFilter: pf})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var admitted int
	for range 300 {
		if d, _ := l.Allow(ctx, "a"); d.Allowed {
			admitted++
		}
	}
	// Headroom 2 of 4 instances: 2 × 100 / 4 = 50 pass to the store.
	if admitted != 50 || s.calls.Load() != 50 {
		t.Fatalf("flood of 300: %d admitted, %d store calls; want 50 and 50", admitted, s.calls.Load())
	}
	// A cost above the pre-filter's quota is the store's to decide: the
	// pre-filter refuses it with that quota as its Limit.
	if d, err := pf.AllowN(ctx, "c", 60); err != nil || d.Allowed || d.Limit != 50 || pf.Quota() != 100 {
		t.Fatalf("the pre-filter alone, cost 60: %+v, %v, Quota() %d; want refused with Limit 50, Quota() 100", d, err, pf.Quota())
	}
	if d, _ := l.AllowN(ctx, "b", 60); !d.Allowed || s.calls.Load() != 51 {
		t.Fatalf("cost 60 over a pre-filter of 50: %+v after %d store calls; want the store's admission", d, s.calls.Load())
	}
	if _, err := guard.PreFilter(core.Config{Policy: global, Algorithm: algorithm.FixedWindow{}, Store: mem}, f, -1); err == nil {
		t.Fatal("a negative headroom was accepted")
	}
}

// A refund gives a PreFilter its units back: charges that a later check
// refused and refunded leave the pre-filter with room for what the store
// admits, for every rate algorithm.
func TestPreFilterIsRefunded(t *testing.T) {
	for _, alg := range []core.Algorithm{algorithm.FixedWindow{}, algorithm.SlidingCounter{}, algorithm.SlidingLog{}, algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.LeakyBucket{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			mem := memory.New(nil)
			t.Cleanup(func() { _ = mem.Close() })
			f := newFleet(t, &guard.FleetOptions{Size: 2})
			global := core.PerMinute("api", 10)
			pf, err := guard.PreFilter(core.Config{Policy: global, Algorithm: alg, Store: mem}, f, 0)
			if err != nil {
				t.Fatal(err)
			}
			s := newFlaky() // not InProcess: the pre-filter applies
			t.Cleanup(func() { _ = s.mem.Close() })
			l, err := core.New(core.Config{Policy: global, Algorithm: alg, Store: s, PreFilter: pf})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 30 {
				d, rc, err := l.Charge(ctx, "a", 1)
				if err != nil || !d.Allowed || rc == nil {
					t.Fatalf("charge %d: %+v, receipt %v, %v; want admitted (each is refunded)", i, d, rc, err)
				}
				if _, err := rc.Refund(ctx, 1); err != nil {
					t.Fatalf("refund %d: %v", i, err)
				}
			}
			admitted := 0
			for range 10 {
				if d, _ := l.Allow(ctx, "a"); d.Allowed {
					admitted++
				}
			}
			if admitted < 9 {
				t.Errorf("after 30 refunded charges, %d of 10 admitted; want the store's limit, the pre-filter's units given back", admitted)
			}
		})
	}
}

// A Fleet not made by NewFleet, a nil store pointer and a huge
// MaxInstances are refused or bounded, not panics.
func TestFleetBadInput(t *testing.T) {
	cfg := core.Config{Policy: core.PerSecond("p", 10), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)}
	if _, err := guard.FleetFallback(cfg, &guard.Fleet{}); err == nil {
		t.Error("FleetFallback took a zero Fleet")
	}
	if _, err := guard.PreFilter(cfg, &guard.Fleet{}, 0); err == nil {
		t.Error("PreFilter took a zero Fleet")
	}
	if n := (&guard.Fleet{}).Size(); n != 1 {
		t.Errorf("a zero Fleet's Size() = %d, want at least 1", n)
	}
	var nilStore *memory.Store
	if _, err := guard.NewFleet(&guard.FleetOptions{Store: nilStore}); err == nil {
		t.Error("NewFleet took a nil *memory.Store")
	}
	f, err := guard.NewFleet(&guard.FleetOptions{Store: memory.New(nil), MaxInstances: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	for _, o := range []guard.FleetOptions{
		{Interval: time.Nanosecond},                              // a heartbeat loop that never rests
		{Interval: 9 * time.Millisecond},                         //
		{Interval: -time.Second},                                 //
		{Interval: 25 * time.Hour},                               //
		{Interval: math.MaxInt64},                                // 3 × Interval would overflow
		{Interval: time.Second, Expiry: 1500 * time.Millisecond}, // counted out between its own beats
		{Expiry: -time.Second},                                   //
		{Expiry: 31 * 24 * time.Hour},                            //
		{Size: math.MaxInt},                                      // Limit·k/Size would overflow
		{Size: 65_537},                                           //
		{MaxInstances: -1},                                       // read as the default before
		{Timeout: -time.Second},                                  //
	} {
		o.Store = memory.New(nil)
		if f, err := guard.NewFleet(&o); err == nil {
			_ = f.Close()
			t.Errorf("NewFleet took Interval %v, Expiry %v, Size %d, MaxInstances %d, Timeout %v", o.Interval, o.Expiry, o.Size, o.MaxInstances, o.Timeout)
		}
	}
}

func TestFleetBeatAfterCloseWritesNothing(t *testing.T) {
	s := newFlaky()
	t.Cleanup(func() { _ = s.mem.Close() })
	f := newFleet(t, &guard.FleetOptions{Store: s, Interval: time.Hour})
	if err := f.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	calls := s.calls.Load()
	if err := f.Beat(t.Context()); err == nil {
		t.Error("Beat after Close succeeded")
	}
	if n := s.calls.Load() - calls; n != 0 {
		t.Errorf("Beat after Close wrote %d heartbeats: the closed instance would be counted for another Expiry", n)
	}
	if err := f.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestFleetLimitersRefuseATypedNilAlgorithm(t *testing.T) {
	var gcra *algorithm.GCRA
	cfg := core.Config{Policy: core.PerSecond("p", 10), Algorithm: gcra, Store: memory.New(nil)}
	f := newFleet(t, &guard.FleetOptions{Size: 2})
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("a constructor panicked: %v", v)
		}
	}()
	if _, err := guard.FleetFallback(cfg, f); err == nil {
		t.Error("FleetFallback took a nil *algorithm.GCRA")
	}
	if _, err := guard.PreFilter(cfg, f, 0); err == nil {
		t.Error("PreFilter took a nil *algorithm.GCRA")
	}
}

// After an outage longer than Expiry every instance's heartbeat has
// expired, and the first beat that gets through counts only the instances
// that beat since: the count must not fall on it (the fallback's shares
// would grow while breakers are still open), only once this instance has
// beaten for Expiry again, when every live instance has.
func TestFleetCountDoesNotFallOnTheFirstBeatAfterAnOutage(t *testing.T) {
	s := newFlaky()
	t.Cleanup(func() { _ = s.mem.Close() })
	o := &guard.FleetOptions{Store: s, Interval: 100 * time.Millisecond} // Expiry 300 ms
	a, b, c := newFleet(t, o), newFleet(t, o), newFleet(t, o)
	waitSize(t, a, 3)
	// b and c stop for good; a keeps beating.
	_ = b.Close()
	_ = c.Close()
	s.set(errDown)
	time.Sleep(700 * time.Millisecond) // every heartbeat expires
	s.set(nil)
	if err := a.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := a.Size(); n != 3 {
		t.Fatalf("the first beat after an outage, which alone reached the store: size %d, want the last count, 3", n)
	}
	// Once a has beaten for Expiry, its count is the fleet's again.
	waitSize(t, a, 1)
}

// The limiters FleetFallback and PreFilter build decide for another
// limiter, which reports their decisions (Degraded, PreFiltered): built
// from one Config with one Observer, as a process shares one, each
// decision is heard once, not twice.
func TestFleetLimitersAreNotObservedTwice(t *testing.T) {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	f := newFleet(t, &guard.FleetOptions{Size: 1})
	var heard atomic.Int64
	cfg := core.Config{Policy: core.PerMinute("api", 100), Algorithm: algorithm.FixedWindow{}, Store: mem, Observer: func(core.Event) { heard.Add(1) }}
	fb, err := guard.FleetFallback(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := guard.PreFilter(cfg, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	down := newFlaky()
	down.set(errDown)
	primary := cfg
	primary.Store, primary.Failure, primary.Fallback, primary.PreFilter = down, core.FailFallback, fb, pf
	l, err := core.New(primary)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if d, err := l.Allow(context.Background(), "a"); err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("%+v, %v; want the fallback's admission", d, err)
		}
	}
	if n := heard.Load(); n != 10 {
		t.Fatalf("10 decisions, %d events heard; want 10", n)
	}
}
