package conformance

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// admissionPolicy has a quota of 50 for every algorithm. The durations are
// long so that keys live far longer than the test, by any clock.
func admissionPolicy(window time.Duration) core.Policy {
	return core.Policy{Name: "admission", Limit: 50, Window: window, Burst: 50, MaxDelay: window / 2, LeaseTTL: window}
}

// checkAdmission: concurrentCalls identical calls for one key, over a fleet
// that shares a ManualClock stopped at one instant. Every order of identical
// calls is the same sequence of decisions, so the store must hand out
// exactly the decisions of the Go step run serially: not one more admitted,
// not one fewer, the same Remaining, RetryAfter, ResetAfter and Delay.
func checkAdmission(t testing.TB, e *env) {
	p := admissionPolicy(time.Hour)
	type run struct {
		n     int64
		calls int
	}
	runs := []run{{1, concurrentCalls}}
	if e.leaser == nil {
		runs = append(runs, run{3, concurrentCalls / 3}) // whole-cost admission: 3 units or none
	}
	for _, r := range runs {
		n := r.n
		clock := core.NewManualClock(epoch)
		fleet := e.fleet(t, p, same(clock, fleetSize)...)
		id := identity(t, fleet[0])
		got, contended := hammer(t, e, fleet, id, n, r.calls)
		want := serial(e.alg, p, epoch, n, len(got))
		what := fmt.Sprintf("%s, %d calls of n=%d at one instant over %d instances", e.alg.Name(), r.calls, n, fleetSize)
		if msg := diffDecisions(got, want); msg != "" {
			t.Errorf("%s: %s", what, msg)
		}
		checkSlots(t, e, p, what, n, got)
		if full := admitted(serial(e.alg, p, epoch, n, r.calls)); admitted(got) < full && admitted(got) == len(got) {
			t.Errorf("%s: %d calls gave up on contention, leaving only %d decided, fewer than the %d the quota admits: "+
				"the check cannot show the quota fills (raise the store's retry bound in the harness)", what, contended, len(got), full)
		}
	}
}

// checkSlots holds decisions made at one instant to what every algorithm
// promises whatever its Go step says: no more units than the quota, no
// Delay above MaxDelay, and no two units given the same queue slot (a
// nonzero Delay).
func checkSlots(t testing.TB, e *env, p core.Policy, what string, n int64, ds []core.Decision) {
	t.Helper()
	if units := int64(admitted(ds)) * n; units > e.quota(p) {
		t.Errorf("%s: OVER-ADMISSION: %d units admitted at one instant; the quota is %d", what, units, e.quota(p))
	}
	maxDelay := core.Micros(p.MaxDelayMicros())
	seen := map[time.Duration]bool{}
	for _, d := range ds {
		if !d.Allowed {
			continue
		}
		if d.Delay > maxDelay {
			t.Errorf("%s: an admission has Delay %v, above MaxDelay %v", what, d.Delay, maxDelay)
			return
		}
		if d.Delay > 0 && seen[d.Delay] {
			t.Errorf("%s: two admissions share the queue slot Delay %v", what, d.Delay)
			return
		}
		seen[d.Delay] = true
	}
}

// checkAdmissionNoClock is checkAdmission as production runs it: no Clock
// (the server's clock on the script path, each instance's on the generic
// path), with a 30-day window so that the run cannot see a refill. The count
// never exceeds what the Go step admits between the run's first and last
// instant, and is exact unless the run straddles the edge of an aligned
// window or the algorithm may judge out-of-order clock readings more
// strictly (GCRA, on the generic path, where each instance reads its clock
// before the store decides).
func checkAdmissionNoClock(t testing.TB, e *env) {
	p := admissionPolicy(core.MaxWindow)
	fleet := e.fleet(t, p, same(nil, fleetSize)...)
	id := identity(t, fleet[0])
	// The margin covers a server clock that differs from this machine's.
	const margin = time.Minute
	t0 := time.Now().Add(-margin)
	got, contended := hammer(t, e, fleet, id, 1, concurrentCalls)
	t1 := time.Now().Add(margin)
	n := len(got)
	// Each call read the clock somewhere between t0 and t1, and the
	// readings reach the store in any order.
	lo, hi := splitBetween(e.alg, p, t0, t1, 1, n)
	hi = max(hi, mostBetween(e.alg, p, t0, t1, 1, n, n))
	at0, at1 := serial(e.alg, p, t0, 1, n), serial(e.alg, p, t1, 1, n)
	c := admitted(got)
	what := fmt.Sprintf("%s, %d calls for one key over %d instances with no Clock", e.alg.Name(), concurrentCalls, fleetSize)
	if c > hi {
		t.Errorf("%s: OVER-ADMISSION: %d admitted; the algorithm admits at most %d between %s and %s",
			what, c, hi, t0.UTC().Format(time.RFC3339Nano), t1.UTC().Format(time.RFC3339Nano))
	}
	// The count must be exact where every order tried admits the same.
	steady := lo == hi && admitted(at0) == hi && admitted(at1) == hi
	denied := c < n
	switch {
	case steady && denied && c != hi:
		t.Errorf("%s: %d admitted; the algorithm admits exactly %d", what, c, hi)
	case steady && !denied && c < hi:
		t.Errorf("%s: %d calls gave up on contention, leaving only %d decided, fewer than the %d the quota admits", what, contended, n, hi)
	}
	// Queue slots (the leaky bucket's Delay) are the Go step's, shifted by
	// at most the time the run took; and none is past MaxDelay.
	gd, wd := delays(got), delays(at0)
	if len(gd) > 0 && gd[len(gd)-1] > core.Micros(p.MaxDelayMicros()) {
		t.Errorf("%s: an admission has Delay %v, above MaxDelay %v", what, gd[len(gd)-1], core.Micros(p.MaxDelayMicros()))
	}
	for i := range min(len(gd), len(wd)) {
		if diff := gd[i] - wd[i]; diff > t1.Sub(t0) || -diff > t1.Sub(t0) {
			t.Errorf("%s: admitted delays %v are not the queue slots %v of the Go step (allowing %v of drift)", what, short(gd), short(wd), t1.Sub(t0))
			break
		}
	}
	// Remaining is not compared: where instances' clock readings reach the
	// store out of order, an algorithm may judge a call at its earlier now
	// (GCRA does), which changes Remaining but not the count. The
	// ManualClock check compares it exactly.
}

// checkSkewedFleet: half the fleet runs Capabilities.ClockSkew ahead of the
// other half (ManualClocks, stopped). The count admitted must not exceed the
// most the Go step admits for the same calls at the two instants, in any
// order.
func checkSkewedFleet(t testing.TB, e *env) {
	p := admissionPolicy(time.Hour)
	t0 := epoch
	t1 := epoch.Add(e.caps.ClockSkew)
	behind, ahead := core.NewManualClock(t0), core.NewManualClock(t1)
	fleet := e.fleet(t, p, behind, ahead)
	id := identity(t, fleet[0])
	const calls = concurrentCalls / 2
	got, _ := hammer(t, e, fleet, id, 1, calls)
	hi := mostBetween(e.alg, p, t0, t1, 1, calls/2, calls/2)
	if c := admitted(got); c > hi {
		t.Errorf("%s, %d calls for one key from instances %v apart: OVER-ADMISSION: %d admitted; the algorithm admits at most %d",
			e.alg.Name(), calls, e.caps.ClockSkew, c, hi)
	}
}

// hammer makes calls concurrent calls for id, n units each (Acquire, never
// released, for a Leaser), spread round-robin over the fleet, all released
// at once. It returns the decisions of the calls the store decided and the
// number that gave up on contention (core.ErrContention); any other error
// fails the test.
func hammer(t testing.TB, e *env, fleet []*core.Limiter, id string, n int64, calls int) ([]core.Decision, int) {
	t.Helper()
	ctx := t.Context()
	ds := make([]core.Decision, calls)
	errs := make([]error, calls)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		l := fleet[i%len(fleet)]
		wg.Go(func() {
			<-start
			if e.leaser != nil {
				_, ds[i], errs[i] = l.Acquire(ctx, id)
			} else {
				ds[i], errs[i] = l.AllowN(ctx, id, n)
			}
		})
	}
	close(start)
	wg.Wait()
	var got []core.Decision
	contended := 0
	var other []string
	for i, err := range errs {
		switch {
		case err == nil:
			got = append(got, ds[i])
		case errors.Is(err, core.ErrContention):
			contended++
		default:
			other = append(other, err.Error())
		}
	}
	if len(other) > 0 {
		t.Errorf("%s: %d of %d concurrent calls failed; first: %s", e.alg.Name(), len(other), calls, other[0])
	}
	if contended > 0 {
		t.Logf("%s: %d of %d concurrent calls gave up on contention", e.alg.Name(), contended, calls)
	}
	return got, contended
}

// diffDecisions compares two multisets of decisions and describes the
// difference, over-admission first; "" when they are equal.
func diffDecisions(got, want []core.Decision) string {
	g, w := admitted(got), admitted(want)
	switch {
	case g > w:
		return fmt.Sprintf("OVER-ADMISSION: %d of %d calls admitted; the algorithm admits exactly %d", g, len(got), w)
	case g < w:
		return fmt.Sprintf("under-admission: %d of %d calls admitted; the algorithm admits exactly %d", g, len(got), w)
	}
	got, want = slices.Clone(got), slices.Clone(want)
	slices.SortFunc(got, compareDecisions)
	slices.SortFunc(want, compareDecisions)
	var b strings.Builder
	for i := range got {
		if got[i] != want[i] {
			fmt.Fprintf(&b, "\n\tgot  %+v\n\twant %+v", got[i], want[i])
			if b.Len() > 2000 {
				break
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "the decisions are those of no serial order (sorted, first differences):" + b.String()
}

func compareDecisions(a, b core.Decision) int {
	bit := func(x bool) int {
		if x {
			return 1
		}
		return 0
	}
	return cmp.Or(
		cmp.Compare(bit(a.Allowed), bit(b.Allowed)),
		cmp.Compare(a.Remaining, b.Remaining),
		cmp.Compare(a.Delay, b.Delay),
		cmp.Compare(a.RetryAfter, b.RetryAfter),
		cmp.Compare(a.ResetAfter, b.ResetAfter),
		cmp.Compare(a.Limit, b.Limit),
		cmp.Compare(bit(a.Degraded), bit(b.Degraded)),
	)
}

// delays are the admitted decisions' Delays, sorted.
func delays(ds []core.Decision) []time.Duration {
	var out []time.Duration
	for _, d := range ds {
		if d.Allowed {
			out = append(out, d.Delay)
		}
	}
	slices.Sort(out)
	return out
}

// short prints at most the first 20 elements of xs.
func short[T any](xs []T) string {
	if len(xs) <= 20 {
		return fmt.Sprint(xs)
	}
	return fmt.Sprintf("%v… (%d in all)", xs[:20], len(xs))
}
