package conformance

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// checkInFlight hammers a concurrency limit from a fleet whose ManualClock
// stands still (so no lease is reclaimed): Acquire, hold, Release, again.
func checkInFlight(t testing.TB, e *env) {
	inFlight(t, e, core.NewManualClock(epoch), time.Hour, 12)
}

// checkInFlightNoClock is checkInFlight with no Clock, as production runs
// it, and a LeaseTTL far longer than the test.
func checkInFlightNoClock(t testing.TB, e *env) {
	inFlight(t, e, nil, core.MaxWindow, 6)
}

// inFlight: workers on every instance of a fleet acquire, hold briefly and
// release, rounds times each. An atomic count of the leases held (raised
// after Acquire returns, lowered before Release is called, so it never
// counts a slot that is not held) must never exceed the limit. Afterwards
// every slot must be free again: the limit is acquired in full.
func inFlight(t testing.TB, e *env, clock core.Clock, window time.Duration, rounds int) {
	p := core.Policy{Name: "in-flight", Limit: 5, Window: window, LeaseTTL: window}
	fleet := e.fleet(t, p, same(clock, fleetSize)...)
	id := identity(t, fleet[0])
	ctx := t.Context()
	const workers = 8 * fleetSize
	var held, peak, granted, contended atomic.Int64
	var once sync.Once
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		l := fleet[w%len(fleet)]
		wg.Go(func() {
			<-start
			for range rounds {
				lease, d, err := l.Acquire(ctx, id)
				switch {
				case errors.Is(err, core.ErrContention):
					contended.Add(1)
					continue
				case err != nil:
					t.Errorf("%s: Acquire: %v", e.alg.Name(), err)
					return
				case !d.Allowed:
					continue
				}
				granted.Add(1)
				n := held.Add(1)
				for {
					if m := peak.Load(); n <= m || peak.CompareAndSwap(m, n) {
						break
					}
				}
				if n > p.Limit {
					once.Do(func() {
						t.Errorf("%s: OVER-ADMISSION: %d leases held at once; the limit is %d", e.alg.Name(), n, p.Limit)
					})
				}
				time.Sleep(50 * time.Microsecond)
				held.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Errorf("%s: Release: %v", e.alg.Name(), err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%s: %d leases granted to %d workers, at most %d held at once; %d acquires gave up on contention",
		e.alg.Name(), granted.Load(), workers, peak.Load(), contended.Load())
	if t.Failed() {
		return
	}
	// Every lease was released: the whole limit is free again, and one more
	// is denied.
	var leases []*core.Lease
	for i := range p.Limit {
		d, lease := e.take(t, fleet[int(i)%len(fleet)], id, 1)
		if !d.Allowed {
			t.Fatalf("%s: after every lease was released, acquire %d of %d was denied (%+v): released slots are not reusable",
				e.alg.Name(), i+1, p.Limit, d)
		}
		leases = append(leases, lease)
	}
	if d, _ := e.take(t, fleet[0], id, 1); d.Allowed {
		t.Errorf("%s: acquired %d leases with a limit of %d", e.alg.Name(), p.Limit+1, p.Limit)
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Errorf("%s: Release: %v", e.alg.Name(), err)
		}
	}
}

// checkLeaseReclaim: leases that are never released hold their slots until
// LeaseTTL, and then free them; a late Release of a reclaimed lease does not
// free a slot that another lease now holds.
func checkLeaseReclaim(t testing.TB, e *env) {
	p := core.Policy{Name: "reclaim", Limit: 3, Window: time.Hour, LeaseTTL: 10 * time.Minute}
	clock := core.NewManualClock(epoch)
	fleet := e.fleet(t, p, clock, clock)
	id := identity(t, fleet[0])
	acquireAll := func(when string) []*core.Lease {
		var ls []*core.Lease
		for i := range p.Limit {
			d, lease := e.take(t, fleet[int(i)%2], id, 1)
			if !d.Allowed {
				t.Fatalf("%s: %s, acquire %d of %d was denied: %+v", e.alg.Name(), when, i+1, p.Limit, d)
			}
			ls = append(ls, lease)
		}
		if d, _ := e.take(t, fleet[1], id, 1); d.Allowed {
			t.Fatalf("%s: %s, acquired %d leases with a limit of %d", e.alg.Name(), when, p.Limit+1, p.Limit)
		}
		return ls
	}
	stale := acquireAll("on a fresh key")
	clock.Advance(p.LeaseTTL - time.Millisecond)
	if d, _ := e.take(t, fleet[0], id, 1); d.Allowed {
		t.Fatalf("%s: a lease was reclaimed %v before its LeaseTTL of %v ran out", e.alg.Name(), time.Millisecond, p.LeaseTTL)
	}
	clock.Advance(time.Millisecond)
	acquireAll("once the unreleased leases' LeaseTTL had passed")
	for _, l := range stale {
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("%s: Release of a reclaimed lease: %v", e.alg.Name(), err)
		}
	}
	if d, _ := e.take(t, fleet[0], id, 1); d.Allowed {
		t.Errorf("%s: releasing reclaimed leases freed slots that newer leases hold: acquired %d+1 with a limit of %d",
			e.alg.Name(), p.Limit, p.Limit)
	}
}
