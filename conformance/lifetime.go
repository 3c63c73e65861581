package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// TTLInspector is implemented by harnesses that can read how long the
// backend will keep a key. With it, LongTTL checks that a state is kept as
// long as it counts when that is a month (core.MaxWindow, the longest
// window a policy may have): the checks that wait out states
// (Expiry, Retention) see TTLs of seconds, so a store that caps or cuts
// only long TTLs (a maximum TTL, a field of 16-bit seconds, a unit
// mistaken above some length) passes them, and admits a drained key again
// once its cap has run.
type TTLInspector interface {
	// TTL returns how much longer the backend keeps key's state, as its
	// own clock counts (Redis's PTTL); ok is false when it holds none. A
	// state that never expires may report any duration over a day.
	TTL(ctx context.Context, key store.Key) (ttl time.Duration, ok bool, err error)
}

// The LongTTL check's policy window, the longest a policy may have (a cap
// of two days, or a field of 16-bit seconds, cuts it), and the least
// RetryAfter it judges: an aligned window (the fixed window) drained in
// the last minutes of its month says little, and is skipped, saying so.
const (
	longWindow = core.MaxWindow
	longLeast  = 10 * time.Minute
)

// checkLongTTL (once per path, with a TTLInspector): a key drained under a
// policy of a month (longWindow) is kept, by the backend's own count, at least as long as
// its denial says to wait (less the time since the denial, and a second
// for a store that counts whole seconds): dropped sooner, the next request
// meets a fresh quota before RetryAfter, an over-admission.
func checkLongTTL(t testing.TB, h Harness, algs []core.Algorithm, script bool) {
	insp, ok := h.(TTLInspector)
	if !ok {
		t.Skip("the harness is not a TTLInspector: a state's lifetime is not observable, and states of a day are too long to wait out")
	}
	p := core.Policy{Name: "long-ttl", Limit: 2, Window: longWindow, MaxDelay: time.Microsecond, LeaseTTL: longWindow}
	s := h.NewStore(t)
	for _, e := range pathEnvs(h, algs, script, p) {
		name := e.alg.Name()
		l := e.limiter(t, s, p, nil)
		id := identity(t, l)
		d, asked, ok := drain(t, e, l, id)
		switch {
		case !ok:
			continue
		case d.Allowed:
			t.Errorf("%s: %d requests in a row were admitted under a limit of 2 in %v", name, drainLimit, longWindow)
			continue
		case d.RetryAfter < longLeast:
			t.Logf("%s: drained %v before its window ends: too close to judge its TTL", name, d.RetryAfter.Round(time.Second))
			continue
		}
		ttl, found, err := insp.TTL(t.Context(), l.Key(id))
		if err != nil {
			t.Fatalf("%s: TTL: %v", name, err)
		}
		// Kept until the state is whole again (ResetAfter), which may be
		// later than the next unit is back (RetryAfter, a bucket's): a
		// state dropped between the two meets a whole quota early. A
		// store that keeps a key's first TTL when a later write asks a
		// longer one (an upsert that leaves the expiry) drops it there.
		least := max(d.RetryAfter, d.ResetAfter) - time.Since(asked) - time.Second
		switch {
		case !found:
			t.Errorf("%s: OVER-ADMISSION: a key drained %v ago, whose denial said to retry in %v, is gone: the store dropped the state before its TTL",
				name, time.Since(asked).Round(time.Millisecond), d.RetryAfter.Round(time.Second))
		case ttl < least:
			t.Errorf("%s: OVER-ADMISSION: a key whose denial said to retry in %v, whole again in %v, is kept only %v longer: the store cut its TTL short (a cap, a unit mistaken, or a later write's longer TTL not kept), and a request after that meets a fresh quota",
				name, d.RetryAfter.Round(time.Second), d.ResetAfter.Round(time.Second), ttl.Round(time.Millisecond))
		}
	}
}
