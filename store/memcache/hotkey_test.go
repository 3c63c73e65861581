package memcache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memcache"
)

// TestHotKey: 64 goroutines hammer one key for a bounded time through two
// Stores (two instances, each with a client of its own), at the default
// retry bound. Every call must be decided (no livelock, no error) and the
// count admitted must stay within the algorithm's bound for the time the run
// took. The log gives decisions/s and the retry distribution.
//
// The Limiters' deadline is generous, so that the test judges the retry
// bound and not the speed of a loaded machine (a deadline error is not a
// contention error, and fails the test all the same).
func TestHotKey(t *testing.T) {
	addr := firstServer(t)
	run := 2 * time.Second
	if testing.Short() {
		run = 500 * time.Millisecond
	}
	for _, tc := range []struct {
		alg core.Algorithm
		p   core.Policy
		// bound is the most the algorithm admits for calls whose now lies
		// in [t0, t1].
		bound func(p core.Policy, t0, t1 time.Time) int64
	}{
		// A rate near what one key sustains, so that most calls write.
		{algorithm.GCRA{}, core.Policy{Name: "hot", Limit: 5000, Window: time.Second, Burst: 50}, bucketBound},
		// A rate well below it, so that the bound binds all along.
		{algorithm.TokenBucket{}, core.Policy{Name: "hot", Limit: 1000, Window: time.Second, Burst: 100}, bucketBound},
		{algorithm.FixedWindow{}, core.Policy{Name: "hot", Limit: 50, Window: 100 * time.Millisecond}, windowBound},
	} {
		t.Run(tc.alg.Name(), func(t *testing.T) {
			errs := hotKey(t, addr, nil, tc.alg, tc.p, run, tc.bound)
			for _, err := range errs {
				t.Errorf("a call failed: %v", err)
			}
		})
	}
	// Without the per-key queue every goroutine races to the server: the
	// compare-and-swap loop alone must still never over-admit nor livelock.
	// Calls may then give up on contention; they are counted, not failed.
	t.Run("gcra-NoLocalQueue", func(t *testing.T) {
		p := core.Policy{Name: "hot", Limit: 5000, Window: time.Second, Burst: 50}
		for _, err := range hotKey(t, addr, &memcache.Options{NoLocalQueue: true}, algorithm.GCRA{}, p, run, bucketBound) {
			if !errors.Is(err, core.ErrContention) {
				t.Errorf("a call failed: %v", err)
			}
		}
	})
}

// bucketBound: at most B + ⌊(t1 − t0)/T⌋ for GCRA and the token bucket.
func bucketBound(p core.Policy, t0, t1 time.Time) int64 {
	return p.Capacity() + t1.Sub(t0).Microseconds()/p.IntervalMicros()
}

// windowBound: at most Limit in each aligned window that [t0, t1] touches.
func windowBound(p core.Policy, t0, t1 time.Time) int64 {
	w := p.WindowMicros()
	return p.Limit * (t1.UnixMicro()/w - t0.UnixMicro()/w + 1)
}

// hotKey runs the hot key and checks liveness and the bound; it returns the
// errors callers got (at most one per goroutine).
func hotKey(t *testing.T, addr string, opts *memcache.Options, alg core.Algorithm, p core.Policy, run time.Duration,
	bound func(core.Policy, time.Time, time.Time) int64) []error {
	const goroutines = 64
	stores := []*memcache.Store{newStore(t, opts, addr), newStore(t, opts, addr)}
	limiters := make([]*core.Limiter, len(stores))
	for i, s := range stores {
		limiters[i] = newLimiter(t, s, alg, p, nil)
	}
	id := uniqueKey(t).Identity

	var admitted, denied, failed atomic.Int64
	var errMu sync.Mutex
	var errs []error
	perGoroutine := make([]int64, goroutines)
	ctx := context.Background()
	t0 := time.Now()
	stop := t0.Add(run)
	var wg sync.WaitGroup
	for g := range goroutines {
		l := limiters[g%len(limiters)]
		wg.Go(func() {
			var reported bool
			for time.Now().Before(stop) {
				d, err := l.Allow(ctx, id)
				switch {
				case err != nil:
					failed.Add(1)
					if !reported {
						reported = true
						errMu.Lock()
						errs = append(errs, err)
						errMu.Unlock()
					}
				case d.Allowed:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
				perGoroutine[g]++
			}
		})
	}
	wg.Wait()
	t1 := time.Now()

	decided := admitted.Load() + denied.Load()
	elapsed := t1.Sub(t0)
	st := mergeStats(stores[0].Stats(), stores[1].Stats())
	t.Logf("%s: %d goroutines, 2 instances, %v: %d decisions (%.0f/s), %d admitted, %d denied, %d errors; "+
		"%d conflicts; attempts per update: %s",
		alg.Name(), goroutines, elapsed.Round(time.Millisecond), decided, float64(decided)/elapsed.Seconds(),
		admitted.Load(), denied.Load(), failed.Load(), st.Conflicts, histogram(st.Attempts))
	for g, n := range perGoroutine {
		if n == 0 {
			t.Errorf("goroutine %d made no call in %v: livelock", g, elapsed)
		}
	}
	// A Limiter's nows come from core's clock, which reads the wall clock
	// through an anchor that is right to a few µs of time.Now (core's
	// maxAnchorSpread): the interval its nows span is wider than [t0, t1]
	// by at most that on each side.
	const clockTolerance = 5 * time.Microsecond
	if max := bound(p, t0.Add(-clockTolerance), t1.Add(clockTolerance)); admitted.Load() > max {
		t.Errorf("OVER-ADMISSION: %d admitted in %v; %s admits at most %d", admitted.Load(), elapsed, alg.Name(), max)
	}
	return errs
}

func mergeStats(a, b memcache.Stats) memcache.Stats {
	a.Updates += b.Updates
	a.Conflicts += b.Conflicts
	a.Contention += b.Contention
	a.Errors += b.Errors
	a.Abandoned += b.Abandoned
	a.LateWrites += b.LateWrites
	for i := range min(len(a.Attempts), len(b.Attempts)) {
		a.Attempts[i] += b.Attempts[i]
	}
	return a
}

// histogram prints the non-zero buckets of a retry distribution as
// "attempts:count" pairs.
func histogram(attempts []uint64) string {
	var b strings.Builder
	for i, n := range attempts {
		if n > 0 {
			fmt.Fprintf(&b, " %d:%d", i, n)
		}
	}
	return strings.TrimSpace(b.String())
}
