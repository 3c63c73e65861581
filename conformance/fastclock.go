package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// fastClockAhead is how far the fast instance of checkFastClock runs ahead:
// far beyond any ClockSkew a fleet declares, and far beyond the horizon of
// fastClockPolicy, as a clock set an hour wrong is.
const fastClockAhead = time.Hour

// fastClockPolicy is "5 per minute" for every algorithm, with every
// duration a few minutes at most, so that a key held an hour in the future
// cannot pass for one the policy still needs.
func fastClockPolicy() core.Policy {
	return core.Policy{Name: "fast-clock", Limit: 5, Window: time.Minute, Burst: 5,
		MaxDelay: 30 * time.Second, LeaseTTL: time.Minute}
}

// skewOf is the clock skew the store allows for (storeSkew).
func (e *env) skewOf() time.Duration { return storeSkew(e.stores[0], e.caps) }

// storeSkew is the clock skew store s allows for: what it declares
// (store.ClockSkewer), else what the harness declares.
func storeSkew(s store.Store, caps Capabilities) time.Duration {
	if sk, ok := s.(store.ClockSkewer); ok {
		return max(sk.ClockSkew(), 0)
	}
	return caps.ClockSkew
}

// checkFastClock: one instance of the fleet runs an hour ahead (a clock set
// wrong), the others are right. The fast one admits once; then a correct
// instance decides, and from that decision on the correct instances must
// get their whole quota back within the store's clock skew plus the time
// the policy itself needs to recover from a full drain (horizon), not when
// real time catches up with the fast clock.
func checkFastClock(t testing.TB, e *env) {
	p := fastClockPolicy()
	skew := e.skewOf()
	if skew >= fastClockAhead {
		t.Skipf("the store allows for a clock skew of %v, not less than the %v the check's fast clock runs ahead: "+
			"within its skew a fast clock is one the fleet accepts, and the check would see nothing", skew, fastClockAhead)
	}
	right := core.NewManualClock(epoch)
	fast := core.NewManualClock(epoch.Add(fastClockAhead))
	fleet := e.fleet(t, p, fast, right, right)
	id := identity(t, fleet[1])
	if d, _ := e.take(t, fleet[0], id, 1); !d.Allowed {
		t.Fatalf("%s: the first request for a fresh key was denied: %+v", e.alg.Name(), d)
	}
	first, _ := e.take(t, fleet[1], id, 1)
	bound := skew + horizon(p)
	right.Advance(bound)
	q := e.quota(p)
	got := int64(0)
	var denied core.Decision
	for i := range q {
		d, _ := e.take(t, fleet[1+int(i)%2], id, 1)
		if d.Allowed {
			got++
		} else if denied == (core.Decision{}) {
			denied = d
		}
	}
	if got < q {
		t.Errorf("%s: STARVED by a fast clock: after an instance %v ahead admitted once, the correct instances got %d of "+
			"their quota of %d %v after their first decision (ClockSkew %v plus the policy's horizon %v); "+
			"that first decision was %s, the first refusal after %s",
			e.alg.Name(), fastClockAhead, got, q, bound, skew, horizon(p), brief(first), brief(denied))
		if _, ok := e.stores[0].(store.ClockSkewer); !ok {
			t.Errorf("%s: the store (%T) is not a store.ClockSkewer: a Limiter clamps a far-ahead stored time only "+
				"over a store that declares the clock skew it allows for", e.alg.Name(), e.stores[0])
		} else if _, ok := e.alg.(core.Clamper); !ok {
			t.Errorf("%s: the algorithm (%T) is not a core.Clamper: a Limiter cannot clamp its states", e.alg.Name(), e.alg)
		}
	}
}

// brief prints a decision's verdict and waits.
func brief(d core.Decision) string {
	if d.Allowed {
		return fmt.Sprintf("admitted (remaining %d)", d.Remaining)
	}
	return fmt.Sprintf("refused (RetryAfter %v, ResetAfter %v)", d.RetryAfter, d.ResetAfter)
}
