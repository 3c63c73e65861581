package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// unclamped hides the algorithm's core.Clamper: its steps stand still at
// any stored time ahead of now, however far, as every step did before the
// clamp.
type unclamped struct{ core.Algorithm }

// unclampedLeaser is unclamped for the concurrency algorithm.
type unclampedLeaser struct{ core.Leaser }

func hideClamp(a core.Algorithm) core.Algorithm {
	if l, ok := a.(core.Leaser); ok {
		return unclampedLeaser{l}
	}
	return unclamped{a}
}

// silentSkewStore is the reference store without store.ClockSkewer: a
// store that never tells the Limiter what skew it allows for, so that no
// state it holds is clamped.
type silentSkewStore struct{ s *refStore }

func (s silentSkewStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	return s.s.Update(ctx, key, m)
}

func (s silentSkewStore) Delete(ctx context.Context, key store.Key) error {
	return s.s.Delete(ctx, key)
}

func silentSkew(s *refStore) store.Store { return silentSkewStore{s} }

// A store or an algorithm that lets a clock an hour fast hold a key in its
// future starves the correct instances of the fleet, and FastClock says so,
// for every algorithm; the reference store passes.
func TestFastClockStarvationIsCaught(t *testing.T) {
	for _, alg := range algorithm.All() {
		t.Run(alg.Name(), func(t *testing.T) {
			t.Run("store", func(t *testing.T) {
				expectFailure(t, checkFastClock, maker(silentSkew, Capabilities{ClockSkew: refSkew}, false), alg, "not a store.ClockSkewer")
			})
			t.Run("algorithm", func(t *testing.T) {
				expectAlgFailure(t, checkFastClock, maker(plain, Capabilities{ClockSkew: refSkew}, false), hideClamp(alg), alg, "STARVED")
			})
		})
	}
}

// A harness must say how its fleet's clocks relate: a ClockSkew, or
// OneClock, not both and not neither.
func TestCapabilitiesMustSayClocks(t *testing.T) {
	for _, c := range []struct {
		name string
		caps Capabilities
		fail bool
	}{
		{"neither", Capabilities{}, true},
		{"both", Capabilities{OneClock: true, ClockSkew: refSkew}, true},
		{"skew", Capabilities{ClockSkew: refSkew}, false},
		{"one clock", Capabilities{OneClock: true}, false},
	} {
		h := maker(plain, c.caps, false)
		r := record(t, func(tb testing.TB) { checkCapabilities(tb, h(tb), algorithm.All()) })
		if r.Failed() != c.fail {
			t.Errorf("%s (%+v): the Capabilities check failed = %v, want %v:\n%s", c.name, c.caps, r.Failed(), c.fail, r)
		}
	}
}

// A check that does not apply runs as a subtest that skips with its
// reason, so that a report can print why.
func TestSkippedChecksSayWhy(t *testing.T) {
	for _, c := range []struct {
		check string
		caps  Capabilities
		alg   core.Algorithm
		want  string
	}{
		{"AdmissionSkewedFleet", Capabilities{OneClock: true}, algorithm.GCRA{}, "OneClock"},
		{"InFlight", Capabilities{OneClock: true}, algorithm.GCRA{}, "holds no leases"},
	} {
		for _, k := range checks {
			if k.name != c.check {
				continue
			}
			if why := k.skip(c.alg, c.caps, false); !strings.Contains(why, c.want) {
				t.Errorf("%s with %+v: skip reason %q, want one naming %q", c.check, c.caps, why, c.want)
			}
		}
	}
	if why := generic(algorithm.GCRA{}, Capabilities{ClockSkew: refSkew}, true); why == "" {
		t.Errorf("FastClock gives no reason to skip the script path")
	}
}

// A store that allows for a skew of an hour or more accepts the check's
// fast clock as one of its fleet's: FastClock skips, rather than pass on a
// bound of days that checks nothing.
func TestFastClockSkipsAHugeSkew(t *testing.T) {
	h := maker(plain, Capabilities{ClockSkew: 2 * time.Hour}, false)
	r := record(t, func(tb testing.TB) { checkFastClock(tb, newEnv(tb, h(tb), algorithm.GCRA{}, false)) })
	if !r.Skipped() || r.Failed() {
		t.Fatalf("FastClock under a skew of 2h: skipped %v, failed %v, want a skip:\n%s", r.Skipped(), r.Failed(), r)
	}
}
