package conformance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// checkRetryAfter holds Decision.RetryAfter and ResetAfter to their word,
// under a ManualClock. After a denial at T with RetryAfter r, the same
// request is admitted at T+r and denied at T+r−1ms (T+r/2 when r is 1ms or
// less); and once the admission at T+r is ResetAfter old, the whole quota is
// admitted at once, with the Remaining of a fresh key.
func checkRetryAfter(t testing.TB, e *env) {
	p := core.Policy{Name: "retry-after", Limit: 4, Window: time.Hour, Burst: 6, MaxDelay: 20 * time.Minute, LeaseTTL: 30 * time.Minute}
	if err := checkPolicy(e.alg, p); err != nil {
		t.Fatalf("%s rejects the policy %v: %v", e.alg.Name(), p, err)
	}
	q := e.quota(p)
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 0))
	type round struct {
		name string
		n    int64
		warm int // calls of random cost at random times before the key is exhausted
	}
	traffic := fmt.Sprintf("after random traffic (seed %d)", seed)
	rounds := []round{{"n=1", 1, 0}, {"n=1 " + traffic, 1, 6}}
	if e.leaser == nil {
		rounds = append(rounds, round{fmt.Sprintf("n=quota (%d)", q), q, 0}, round{"random n " + traffic, 1 + r.Int64N(q), 6})
	}
	for _, rd := range rounds {
		clock := core.NewManualClock(epoch)
		fleet := e.fleet(t, p, clock, clock)
		id := identity(t, fleet[0])
		what := fmt.Sprintf("%s on %v, %s", e.alg.Name(), p, rd.name)
		iv := p.IntervalMicros()
		for i := range rd.warm {
			clock.Advance(core.Micros(r.Int64N(iv + 1)))
			e.take(t, fleet[i%2], id, 1+r.Int64N(q))
		}
		// Exhaust the key with requests of cost n.
		var denied core.Decision
		for i := 0; ; i++ {
			if i > int(4*q)+8 {
				t.Fatalf("%s: %d requests of cost %d at one instant were all admitted", what, i, rd.n)
			}
			d, _ := e.take(t, fleet[i%2], id, rd.n)
			if !d.Allowed {
				denied = d
				break
			}
			if d.RetryAfter != 0 {
				t.Errorf("%s: an admission has RetryAfter %v, want 0", what, d.RetryAfter)
			}
		}
		at, wait := clock.Now(), denied.RetryAfter
		if wait <= 0 {
			t.Errorf("%s: a denial has RetryAfter %v; the same request at once would be denied again: %+v", what, wait, denied)
			continue
		}
		early := wait - time.Millisecond
		if wait <= time.Millisecond {
			early = wait / 2
		}
		if early > 0 {
			clock.Set(at.Add(early))
			if d, _ := e.take(t, fleet[1], id, rd.n); d.Allowed {
				t.Errorf("%s: denied with RetryAfter %v, yet admitted after only %v: %+v", what, wait, early, d)
				continue
			}
		}
		clock.Set(at.Add(wait))
		d, _ := e.take(t, fleet[0], id, rd.n)
		if !d.Allowed {
			t.Errorf("%s: denied with RetryAfter %v, and denied again when retried %v later: %+v", what, wait, wait, d)
			continue
		}
		// ResetAfter: the quota is whole again.
		clock.Advance(d.ResetAfter)
		want := e.fresh(p, clock.Now(), q)
		for i := range q {
			n := q
			if e.leaser != nil {
				n = 1
			}
			got, _ := e.take(t, fleet[int(i)%2], id, n)
			if !got.Allowed || (e.leaser == nil && got.Remaining != want.Remaining) {
				t.Errorf("%s: %v after an admission with ResetAfter %v, a request for the whole quota (%d) decided %+v; a fresh key decides %+v",
					what, d.ResetAfter, d.ResetAfter, q, got, want)
			}
			if e.leaser == nil {
				break // one request took it all
			}
		}
	}
}
