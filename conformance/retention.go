package conformance

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// The Retention check's policy window, and the margin it leaves for a
// round trip and for a server clock a little off this machine's: the window
// is long beside both, and short enough to wait out. On the generic path
// the window is at least retentionSkews times the clock skew the store
// allows for, which it adds to its TTLs: a TTL shortened by a quarter must
// still end before the last question, whatever the skew added to it. A
// skew that would take the window past retentionMaxWindow skips the check.
const (
	retentionWindow    = 1500 * time.Millisecond
	retentionSlack     = 150 * time.Millisecond
	retentionSkews     = 8
	retentionMaxWindow = 30 * time.Second
)

// checkRetention (once per path): a state lives as long as it counts. One
// key per algorithm is drained, on the real clock, to its first denial;
// until that denial's RetryAfter has run (less retentionSlack), every
// request is denied, here asked three times from another instance, the last
// just before the RetryAfter ends. The policy admits one unit a window and
// queues nothing, so that the denial lasts as long as the state's TTL (the
// sliding counter's state spans two windows). A store that drops a state
// before its TTL (a TTL shortened or mis-converted, an expiry on another
// clock or in the wrong unit) meets the key fresh and admits: an
// over-admission that the ManualClock checks, whose states are hours long
// and whose runs take milliseconds, never see. The algorithms run side by
// side, about a second and a half in all.
func checkRetention(t testing.TB, h Harness, algs []core.Algorithm, script bool) {
	drainer, asker := h.NewStore(t), h.NewStore(t)
	window := retentionWindow
	if !script {
		skew := storeSkew(drainer, h.Capabilities())
		if window = max(window, retentionSkews*skew); window > retentionMaxWindow {
			t.Skipf("the store adds a clock skew of %v to its TTLs: a state %d times as long, so that a TTL shortened by a quarter ends before it, "+
				"would take longer than %v to wait out", skew, retentionSkews, retentionMaxWindow)
		}
	}
	p := core.Policy{Name: "retention", Limit: 1, Window: window, MaxDelay: time.Microsecond, LeaseTTL: window}
	short := core.Policy{Name: "retention-short", Limit: 1, Window: retentionShort, MaxDelay: time.Microsecond, LeaseTTL: retentionShort}
	var wg sync.WaitGroup
	for _, e := range pathEnvs(h, algs, script, p) {
		l, other := e.limiter(t, drainer, p, nil), e.limiter(t, asker, p, nil)
		id := identity(t, l)
		wg.Go(func() { retain(t, e, l, other, id, window) })
	}
	for _, e := range pathEnvs(h, algs, script, short) {
		l := e.limiter(t, drainer, short, nil)
		id := identity(t, l)
		wg.Go(func() { retainShort(t, e, l, id) })
	}
	wg.Wait()
}

// retentionShort is the window of the check's second policy: its states
// live less than a second.
const retentionShort = 400 * time.Millisecond

// retainShort drains id under a policy whose states live less than a
// second: the first denial must come at the second request. A store that
// keeps TTLs in whole seconds and rounds such a state's down to none (an
// expires-at column, a conversion in the wrong unit) writes nothing, and
// admits every request: unlimited, which the main policy's long window
// never shows. Only a drain of drainLimit admissions made within one
// window is an error: on a store slower than that, a correct one admits
// them too.
func retainShort(t testing.TB, e *env, l *core.Limiter, id string) {
	start := time.Now()
	d, _, ok := drain(t, e, l, id)
	if ok && d.Allowed && time.Since(start) < retentionShort {
		t.Errorf("%s: OVER-ADMISSION: %d requests in a row were admitted within %v under a limit of 1 per %v: "+
			"the store kept no state whose TTL is under a second (rounded down to whole seconds?)",
			e.alg.Name(), drainLimit, time.Since(start).Round(time.Millisecond), retentionShort)
	}
}

// retain drains id through l and asks other for it while the denial runs.
// An aligned window (the fixed window, the sliding counter) drained late in
// it ends soon after; such a key (a denial shorter than four fifths of a
// window) is drained again just after the edge, so that its denial runs
// about a whole window and the last question comes after three quarters of
// the state's TTL. A question that would be sent after the denial's end (a
// loaded machine) is not asked.
func retain(t testing.TB, e *env, l, other *core.Limiter, id string, window time.Duration) {
	name := e.alg.Name()
	var (
		d     core.Decision
		asked time.Time
		ok    bool
	)
	for range 2 {
		if d, asked, ok = drain(t, e, l, id); !ok || d.Allowed || d.RetryAfter >= window*4/5 {
			break
		}
		time.Sleep(d.RetryAfter + 10*time.Millisecond)
	}
	switch {
	case !ok:
		return
	case d.Allowed:
		t.Errorf("%s: %d requests in a row were admitted under a limit of 1", name, drainLimit)
		return
	}
	drained := time.Now()
	end := asked.Add(d.RetryAfter - retentionSlack)
	span := end.Sub(drained)
	for i, f := range []float64{0.3, 0.65, 0.95} {
		time.Sleep(time.Until(drained.Add(time.Duration(f * float64(span)))))
		if time.Now().After(end) {
			// Too late to ask: the answers came too slowly. A check that
			// asked none of its later questions has seen nothing.
			if i == 2 {
				t.Logf("%s: the last question came too late to ask (the store's replies took %v)", name, time.Since(drained).Round(time.Millisecond))
			} else {
				t.Errorf("%s: the check could ask only %d of its 3 questions within the denial's %v (the store's replies took %v): too slow to tell whether it keeps states for their TTL",
					name, i, d.RetryAfter.Round(time.Millisecond), time.Since(drained).Round(time.Millisecond))
			}
			return
		}
		got, ok := ask(t, e, other, id)
		if !ok {
			return
		}
		if got.Allowed {
			t.Errorf("%s: OVER-ADMISSION: a key drained %v ago was admitted again, though its denial said to retry in %v: the store dropped the state before its TTL",
				name, time.Since(drained).Round(time.Millisecond), d.RetryAfter.Round(time.Millisecond))
			return
		}
	}
}

// drainLimit bounds the requests drain makes: the Retention policy admits
// a handful before it denies.
const drainLimit = 20

// drain asks for one unit at a time until a denial (a Leaser's leases are
// held, never released) and returns the last decision and when its request
// was sent; ok is false after an error, which it reported.
func drain(t testing.TB, e *env, l *core.Limiter, id string) (d core.Decision, asked time.Time, ok bool) {
	for range drainLimit {
		asked = time.Now()
		if d, ok = ask(t, e, l, id); !ok || !d.Allowed {
			break
		}
	}
	return d, asked, ok
}

// ask asks for one unit (e.try) from any goroutine: an error fails the
// test with Errorf, and ok is false. A Leaser's lease is held.
func ask(t testing.TB, e *env, l *core.Limiter, id string) (core.Decision, bool) {
	d, _, err := e.try(t.Context(), l, id, 1)
	if err != nil {
		t.Errorf("%s: %v", e.alg.Name(), err)
		return d, false
	}
	return d, true
}
