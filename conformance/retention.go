package conformance

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// The Retention check's policy window, and the margin it leaves for a
// round trip and for a server clock a little off this machine's: the window
// is long beside both, and short enough to wait out.
const (
	retentionWindow = 1500 * time.Millisecond
	retentionSlack  = 150 * time.Millisecond
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
	p := core.Policy{Name: "retention", Limit: 1, Window: retentionWindow, MaxDelay: time.Microsecond, LeaseTTL: retentionWindow}
	drainer, asker := h.NewStore(t), h.NewStore(t)
	var wg sync.WaitGroup
	for _, e := range pathEnvs(h, algs, script, p) {
		l, other := e.limiter(t, drainer, p, nil), e.limiter(t, asker, p, nil)
		id := identity(t, l)
		wg.Go(func() { retain(t, e, l, other, id) })
	}
	wg.Wait()
}

// retain drains id through l and asks other for it while the denial runs.
// An aligned window (the fixed window, the sliding counter) drained late in
// it ends soon after; such a key (a denial shorter than four fifths of a
// window) is drained again just after the edge, so that its denial runs
// about a whole window and the last question comes after three quarters of
// the state's TTL. A question that would be sent after the denial's end (a
// loaded machine) is not asked.
func retain(t testing.TB, e *env, l, other *core.Limiter, id string) {
	name := e.alg.Name()
	var (
		d     core.Decision
		asked time.Time
		ok    bool
	)
	for range 2 {
		if d, asked, ok = drain(t, e, l, id); !ok || d.Allowed || d.RetryAfter >= retentionWindow*4/5 {
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
	for _, f := range []float64{0.3, 0.65, 0.95} {
		time.Sleep(time.Until(drained.Add(time.Duration(f * float64(span)))))
		if time.Now().After(end) {
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
