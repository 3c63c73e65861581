package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// layeredFleet decides several limits the way layered Limiters do, one
// after another, with no compensation: a request refused by a later limit
// keeps what the earlier ones took. The multi-limit check must catch it.
func layeredFleet(t testing.TB, e *env, clock core.Clock) []decider {
	fleet := make([]decider, fleetSize)
	for i := range fleet {
		s := e.stores[i]
		lims := map[string]*core.Limiter{}
		fleet[i] = func(ctx context.Context, id string, ls *core.Limits, n int64) (bool, int, error) {
			for j := 0; j < ls.Len(); j++ {
				lm := ls.Limit(j)
				l := lims[lm.Policy.Name]
				if l == nil {
					var err error
					l, err = core.New(core.Config{Policy: lm.Policy, Algorithm: lm.Algorithm, Store: s, Prefix: keyPrefix, Clock: clock, Timeout: callTimeout})
					if err != nil {
						return false, 0, err
					}
					lims[lm.Policy.Name] = l
				}
				d, err := l.AllowN(ctx, id, n)
				if err != nil || !d.Allowed {
					return false, ls.Len(), err
				}
			}
			return true, ls.Len(), nil
		}
	}
	return fleet
}

// syncFleet wraps a fleet so that its calls are serialized (the layered
// deciders keep their Limiters in an unguarded map).
func syncFleet(mk func(testing.TB, *env, core.Clock) []decider) func(testing.TB, *env, core.Clock) []decider {
	return func(t testing.TB, e *env, c core.Clock) []decider {
		inner := mk(t, e, c)
		ch := make(chan struct{}, 1)
		out := make([]decider, len(inner))
		for i, d := range inner {
			out[i] = func(ctx context.Context, id string, ls *core.Limits, n int64) (bool, int, error) {
				ch <- struct{}{}
				defer func() { <-ch }()
				return d(ctx, id, ls, n)
			}
		}
		return out
	}
}

// Layered limits with no compensation charge the limits a later one
// refused: the suite says so, for several algorithms as the first limit,
// and passes core.Multi on the same store.
func TestLayeredLimitsChargeRefusals(t *testing.T) {
	mk := maker(plain, Capabilities{ClockSkew: time.Second}, true)
	for _, alg := range []core.Algorithm{algorithm.FixedWindow{}, algorithm.GCRA{}, algorithm.SlidingLog{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			// The binding limit is the calendar day (the last): every
			// refusal has already charged the first two.
			r := record(t, func(tb testing.TB) {
				checkMultiAdmission(tb, newEnv(tb, mk(tb), alg, false), 2, syncFleet(layeredFleet))
			})
			if !r.Failed() || !strings.Contains(r.String(), "a refused request was charged") {
				t.Errorf("the multi-limit check passed layered limits:\n%s", r)
			} else {
				t.Logf("caught, as it should be: %s", r)
			}
			ref := record(t, func(tb testing.TB) { checkMultiAdmission(tb, newEnv(tb, mk(tb), alg, false), 2, multiFleet) })
			if ref.Failed() {
				t.Errorf("the multi-limit check failed core.Multi on the reference store:\n%s", ref)
			}
		})
	}
}

// A store that is not atomic lets several limits over-admit.
func TestNonAtomicStoreOverAdmitsMulti(t *testing.T) {
	mk := maker(racy, Capabilities{ClockSkew: time.Second}, false)
	for _, alg := range []core.Algorithm{algorithm.FixedWindow{}, algorithm.TokenBucket{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			r := record(t, func(tb testing.TB) { checkMultiAdmission(tb, newEnv(tb, mk(tb), alg, false), 0, multiFleet) })
			if !r.Failed() || !strings.Contains(r.String(), "OVER-ADMISSION") {
				t.Errorf("the multi-limit check passed a racy store:\n%s", r)
			}
		})
	}
}
