package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// The multi-limit checks (core.Multi): for every algorithm that can be one
// of several limits, a set of three limits on one identity (the algorithm,
// a fixed window and a calendar day, each binding in one of the runs),
// decided by a fleet of Multis on separate clients, concurrentCalls at
// once:
//
//   - no limit ever admits past its bound: the count admitted is exactly
//     what the Go steps admit, all or nothing, run serially;
//   - a refused request charges nothing: after the run, a set that holds
//     only the limits that did not bind still has exactly its quota less
//     the units admitted (had a refusal charged them, it would have less);
//   - without a Clock (the server's TIME on the script path) the count
//     never exceeds the smallest quota;
//   - refunds of multi-limit charges (Multi.Charge, Receipt.Refund),
//     interleaved with the charges, never hold more than the smallest
//     quota, and give back exactly at the instant of the charge.

// multiLimits returns the three limits of alg's set; bind names the one
// with the smallest quota.
func multiLimits(t testing.TB, alg core.Algorithm, bind int) []core.Limit {
	t.Helper()
	q := [3]int64{40, 40, 40}
	q[bind] = 20
	p := core.Policy{Name: "own", Limit: q[0], Window: time.Hour, Burst: q[0], MaxDelay: 30 * time.Minute}
	return []core.Limit{
		{Policy: p, Algorithm: alg},
		{Policy: core.Policy{Name: "window", Limit: q[1], Window: time.Hour}, Algorithm: algorithm.FixedWindow{}},
		{Policy: core.Policy{Name: "day", Limit: q[2], Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day, Location: berlin(t)}},
	}
}

// berlin is the calendar limit's zone. A machine without the IANA time
// zone database (a scratch container running the suite) gets a fixed
// offset instead: the checks still hold, without a change of daylight
// saving time to meet.
func berlin(t testing.TB) *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Logf("time.LoadLocation(Europe/Berlin): %v; the calendar limit uses a fixed UTC+1", err)
		return time.FixedZone("UTC+1", 3600)
	}
	return l
}

// multiModel is how many of count calls of n at now the Go steps admit, all
// or nothing, from fresh state.
func multiModel(limits []core.Limit, now time.Time, n int64, count int) int {
	states := make([][]byte, len(limits))
	c := 0
	for range count {
		all := true
		nexts := make([][]byte, len(limits))
		for i, l := range limits {
			p := l.Policy
			next, _, d := l.Algorithm.Step(append([]byte(nil), states[i]...), now.UnixMicro(), n, &p)
			nexts[i] = next
			all = all && d.Allowed
		}
		if all {
			c++
			for i := range nexts {
				if nexts[i] != nil {
					states[i] = nexts[i]
				}
			}
		}
	}
	return c
}

func (e *env) multi(t testing.TB, s store.Store, clock core.Clock) *core.Multi {
	t.Helper()
	m, err := core.NewMulti(core.MultiConfig{Name: "multi", Store: s, Prefix: keyPrefix, Clock: clock, Timeout: callTimeout, NoScript: !e.script})
	if err != nil {
		t.Fatalf("core.NewMulti: %v", err)
	}
	return m
}

// forgetMulti deletes id's state under every limit of ls when the test
// ends, if the store can delete (core.Multi.Reset): a run against a live
// server leaves no keys behind.
func forgetMulti(t testing.TB, e *env, id string, ls *core.Limits) {
	m := e.multi(t, e.stores[0], nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_ = m.Reset(ctx, id, ls)
	})
}

// decider is one instance's multi-limit decision: whether n units for id
// are admitted under every limit of ls, and how many limit states it
// reported.
type decider func(ctx context.Context, id string, ls *core.Limits, n int64) (allowed bool, states int, err error)

// multiFleet is one core.Multi per client of e, all on clock.
func multiFleet(t testing.TB, e *env, clock core.Clock) []decider {
	fleet := make([]decider, fleetSize)
	for i := range fleet {
		m := e.multi(t, e.stores[i], clock)
		fleet[i] = func(ctx context.Context, id string, ls *core.Limits, n int64) (bool, int, error) {
			var buf [4]core.LimitState
			d, states, err := m.AllowN(ctx, id, ls, n, buf[:0])
			return d.Allowed, len(states), err
		}
	}
	return fleet
}

// hammerMulti makes calls decisions of n for id at once, spread over fleet.
func hammerMulti(t testing.TB, fleet []decider, id string, ls *core.Limits, n int64, calls int) (admittedCount, decided int) {
	t.Helper()
	var mu sync.Mutex
	var other []string
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		decide := fleet[i%len(fleet)]
		wg.Go(func() {
			<-start
			allowed, states, err := decide(t.Context(), id, ls, n)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				decided++
				if allowed {
					admittedCount++
				}
				if states != ls.Len() {
					other = append(other, fmt.Sprintf("%d limit states for %d limits", states, ls.Len()))
				}
			case errors.Is(err, core.ErrContention):
			default:
				other = append(other, err.Error())
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Errorf("%d of %d concurrent multi-limit calls failed; first: %s", len(other), calls, other[0])
	}
	return admittedCount, decided
}

// checkMulti runs the multi-limit checks for every algorithm in algs that
// can be one of several limits.
func checkMulti(t *testing.T, h Harness, algs []core.Algorithm, script bool) {
	for _, alg := range algs {
		if alg == nil {
			continue
		}
		if _, ok := alg.(core.Leaser); ok {
			continue
		}
		t.Run(alg.Name(), func(t *testing.T) {
			if _, ok := alg.(core.MultiScripted); script && !ok {
				t.Skipf("%s has no twin in the multi-limit script: the generic path covers it", alg.Name())
			}
			e := newEnv(t, h, alg, script)
			for bind := range 3 {
				t.Run(fmt.Sprintf("binds-%d", bind), func(t *testing.T) { checkMultiAdmission(t, e, bind, multiFleet) })
			}
			t.Run("NoClock", func(t *testing.T) { checkMultiNoClock(t, e) })
			t.Run("Refunds", func(t *testing.T) { checkMultiRefunds(t, e) })
			t.Run("Uncharged", func(t *testing.T) { checkMultiUncharged(t, e) })
		})
	}
}

func checkMultiAdmission(t testing.TB, e *env, bind int, fleetOf func(testing.TB, *env, core.Clock) []decider) {
	limits := multiLimits(t, e.alg, bind)
	ls := core.MustLimits(limits...)
	for _, n := range []int64{1, 3} {
		fleet := fleetOf(t, e, core.NewManualClock(epoch))
		id := fmt.Sprintf("%s#n%d#%d", t.Name(), n, time.Now().UnixNano())
		forgetMulti(t, e, id, ls)
		calls := concurrentCalls / int(n)
		got, decided := hammerMulti(t, fleet, id, ls, n, calls)
		want := multiModel(limits, epoch, n, decided)
		what := fmt.Sprintf("%s: %d calls of n=%d over %d instances, limit %q binds", e.alg.Name(), calls, n, fleetSize, limits[bind].Policy.Name)
		if got > want {
			t.Errorf("%s: OVER-ADMISSION: %d admitted; the limits admit %d", what, got, want)
		} else if got < want {
			t.Errorf("%s: %d admitted; the limits admit exactly %d", what, got, want)
		}
		// A refused request charged nothing: the limits that did not bind
		// still have their quota less what was admitted.
		var rest []core.Limit
		for i, l := range limits {
			if i != bind {
				rest = append(rest, l)
			}
		}
		rs := core.MustLimits(rest...)
		more, _ := hammerMulti(t, fleet[:1], id, rs, n, calls)
		wantMore := multiModel(rest, epoch, n, got+calls) - got
		if more != wantMore {
			t.Errorf("%s: after the run the other limits admitted %d more calls, want %d: a refused request was charged (or a charge lost)", what, more, wantMore)
		}
	}
}

func checkMultiNoClock(t testing.TB, e *env) {
	limits := multiLimits(t, e.alg, 0)
	// Long windows: the run cannot see a refill. The calendar's day may
	// roll during the run; it then admits a second day's quota, which the
	// own limit (binding) still holds.
	limits[0].Policy.Window = core.MaxWindow
	limits[1].Policy.Window = core.MaxWindow
	ls := core.MustLimits(limits...)
	fleet := multiFleet(t, e, nil)
	id := fmt.Sprintf("%s#%d", t.Name(), time.Now().UnixNano())
	forgetMulti(t, e, id, ls)
	got, decided := hammerMulti(t, fleet, id, ls, 1, concurrentCalls)
	if q := ls.Quota(); int64(got) > q {
		t.Errorf("%s: OVER-ADMISSION: %d of %d admitted with no Clock; the smallest quota is %d", e.alg.Name(), got, decided, q)
	}
	if decided == concurrentCalls && got == 0 {
		t.Errorf("%s: nothing admitted from a fresh identity", e.alg.Name())
	}
}

// checkMultiUncharged: a refused multi-limit decision charges nothing, so
// a limit that would have admitted reports what it has as it stands: the
// Remaining and ResetAfter of a Limiter alone on the same policy charged
// as that limit was (ResetAfter errs late only for the sliding log and the
// sliding counter), and with its quota whole, a reset of zero.
func checkMultiUncharged(t testing.TB, e *env) {
	p := core.Policy{Name: "own", Limit: 10, Window: time.Hour}
	gate := core.Limit{Policy: core.Policy{Name: "gate", Limit: 1, Window: core.MaxWindow}, Algorithm: algorithm.GCRA{}}
	ls := core.MustLimits(core.Limit{Policy: p, Algorithm: e.alg}, gate)
	clock := core.NewManualClock(epoch)
	m := e.multi(t, e.stores[0], clock)
	l := e.limiter(t, e.stores[0], p, clock)
	alone := identity(t, l)
	id := fmt.Sprintf("%s#%d", t.Name(), time.Now().UnixNano())
	forgetMulti(t, e, id, ls)
	ctx := t.Context()
	if d, _, err := m.Allow(ctx, id, ls, nil); err != nil || !d.Allowed {
		t.Fatalf("%s: a fresh identity's first multi-limit call: %+v %v", e.alg.Name(), d, err)
	}
	want, _ := e.take(t, l, alone, 1)
	d, states, err := m.Allow(ctx, id, ls, nil)
	if err != nil || d.Allowed || len(states) != 2 || !states[0].Allowed {
		t.Fatalf("%s: the second call: %+v %+v %v; want refused by %q alone", e.alg.Name(), d, states, err, gate.Policy.Name)
	}
	got := states[0]
	_, log := e.alg.(algorithm.SlidingLog)
	_, counter := e.alg.(algorithm.SlidingCounter)
	late := log || counter
	if got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter && !(late && got.ResetAfter > want.ResetAfter) {
		t.Errorf("%s: refused, %q reports Remaining %d, ResetAfter %v; as it stands it has %d, resetting in %v", e.alg.Name(), got.Name, got.Remaining, got.ResetAfter, want.Remaining, want.ResetAfter)
	}
	// ResetAfter is when the quota is whole again, nothing else admitted.
	clock.Advance(want.ResetAfter)
	d, states, err = m.Allow(ctx, id, ls, nil)
	if err != nil || d.Allowed || len(states) != 2 || !states[0].Allowed {
		t.Fatalf("%s: %v on, when the limit alone reset: %+v %+v %v; want refused by %q alone", e.alg.Name(), want.ResetAfter, d, states, err, gate.Policy.Name)
	}
	if got := states[0]; got.Remaining != got.Limit || got.ResetAfter != 0 {
		t.Errorf("%s: refused with %q's quota whole: Remaining %d of %d, ResetAfter %v; want the whole quota, resetting in 0s", e.alg.Name(), got.Name, got.Remaining, got.Limit, got.ResetAfter)
	}
}

// multiAlgs is algs and the calendar (a month in UTC) when algs has none.
func multiAlgs(algs []core.Algorithm) []core.Algorithm {
	out := append([]core.Algorithm(nil), algs...)
	for _, a := range algs {
		if _, ok := a.(algorithm.Calendar); ok {
			return out
		}
	}
	return append(out, algorithm.Calendar{Period: algorithm.Month, Location: time.UTC})
}

// checkMultiRefunds: concurrentCalls charges of one unit at one instant
// over the fleet of Multis, half of the admitted ones refunded at once.
// Never more than the smallest quota is held (admitted less refunded),
// and, when every limit can refund on the path, a refund at the instant
// of its charge gives back exactly its unit to every limit.
func checkMultiRefunds(t testing.TB, e *env) {
	limits := multiLimits(t, e.alg, 0)
	ls := core.MustLimits(limits...)
	clock := core.NewManualClock(epoch)
	fleet := make([]*core.Multi, fleetSize)
	for i := range fleet {
		fleet[i] = e.multi(t, e.stores[i], clock)
	}
	exact := true
	for _, l := range limits {
		_, rf := l.Algorithm.(core.Refunder)
		_, rs := l.Algorithm.(core.RefundScripted)
		exact = exact && rf && (rs || !e.script)
	}
	if exact {
		// Alone first: a refund that gives nothing would pass the count
		// below, which only finds more held (see checkRefunds).
		solo := fmt.Sprintf("%s#solo%d", t.Name(), time.Now().UnixNano())
		forgetMulti(t, e, solo, ls)
		if d, _, r, err := fleet[0].Charge(t.Context(), solo, ls, 1, nil); err != nil || !d.Allowed || r == nil {
			t.Errorf("%s: a multi-limit charge of one unit on a fresh key: %+v, receipt %v, %v; want admitted with a Receipt", e.alg.Name(), d, r, err)
		} else if k, err := r.Refund(t.Context(), 1); k != 1 || err != nil {
			t.Errorf("%s: a multi-limit refund at the instant of its charge, alone on its key, gave back %d of 1 unit (%v)", e.alg.Name(), k, err)
		}
	}
	id := fmt.Sprintf("%s#%d", t.Name(), time.Now().UnixNano())
	forgetMulti(t, e, id, ls)
	var mu sync.Mutex
	var admittedN, refundedN int64
	var other []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range concurrentCalls {
		m := fleet[i%len(fleet)]
		wg.Go(func() {
			<-start
			d, _, r, err := m.Charge(t.Context(), id, ls, 1, nil)
			var k int64
			if err == nil && d.Allowed && i%2 == 0 {
				k, err = r.Refund(t.Context(), 1)
				if errors.Is(err, core.ErrNotRefunded) {
					err = nil
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !errors.Is(err, core.ErrContention) {
				other = append(other, err.Error())
			}
			if err == nil && d.Allowed {
				admittedN++
				refundedN += k
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Errorf("%d multi-limit charges or refunds failed; first: %s", len(other), other[0])
	}
	q := ls.Quota()
	held := admittedN - refundedN
	what := fmt.Sprintf("%s: %d multi-limit charges at one instant, half refunded", e.alg.Name(), concurrentCalls)
	if held > q {
		t.Errorf("%s: OVER-ADMISSION: %d admitted, %d refunded: %d held; the smallest quota is %d", what, admittedN, refundedN, held, q)
	}
	probe, _ := hammerMulti(t, multiFleet(t, e, clock)[:1], id, ls, 1, int(q)+1)
	if held+int64(probe) > q {
		t.Errorf("%s: OVER-ADMISSION: %d held, then %d more admitted; the smallest quota is %d", what, held, probe, q)
	} else if exact && held+int64(probe) < q {
		t.Errorf("%s: %d held and only %d more admitted, short of %d: a refund at the instant of its charge lost units", what, held, probe, q)
	}
}
