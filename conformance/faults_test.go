package conformance

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// These tests show that the suite can fail: each runs one check against a
// store (or algorithm) with a known defect and requires the check to fail,
// naming the defect; and runs the same check against the reference store,
// which must pass. A suite that passed everything would fail them.

// expectFailure runs fn against the faulty harness and against the
// reference store; the first must fail with a message containing want, the
// second must pass. alg is the correct algorithm; a fault in the algorithm
// is passed as faultyAlg (nil: alg).
func expectFailure(t *testing.T, fn func(testing.TB, *env), faulty func(testing.TB) Harness, alg core.Algorithm, want string) {
	t.Helper()
	expectAlgFailure(t, fn, faulty, alg, alg, want)
}

func expectAlgFailure(t *testing.T, fn func(testing.TB, *env), faulty func(testing.TB) Harness, faultyAlg, alg core.Algorithm, want string) {
	t.Helper()
	r := record(t, func(tb testing.TB) { fn(tb, newEnv(tb, faulty(tb), faultyAlg, false)) })
	if !r.Failed() {
		t.Errorf("%s: the check passed a faulty store", alg.Name())
	} else {
		t.Logf("caught, as it should be: %s", r)
	}
	if r.Failed() && !strings.Contains(r.String(), want) {
		t.Errorf("%s: the check failed, but without %q:\n%s", alg.Name(), want, r)
	}
	ref := record(t, func(tb testing.TB) {
		fn(tb, newEnv(tb, maker(plain, Capabilities{ClockSkew: time.Second}, true)(tb), alg, false))
	})
	if ref.Failed() {
		t.Errorf("%s: the check failed the reference store:\n%s", alg.Name(), ref)
	}
}

// A store that reads, yields, then writes (no atomicity) over-admits, and
// every admission check catches it, for every algorithm.
func TestNonAtomicStoreOverAdmits(t *testing.T) {
	mk := maker(racy, Capabilities{ClockSkew: time.Second}, false)
	for _, alg := range algorithm.All() {
		t.Run(alg.Name(), func(t *testing.T) {
			t.Run("Admission", func(t *testing.T) { expectFailure(t, checkAdmission, mk, alg, "OVER-ADMISSION") })
			t.Run("AdmissionNoClock", func(t *testing.T) { expectFailure(t, checkAdmissionNoClock, mk, alg, "OVER-ADMISSION") })
			t.Run("AdmissionSkewedFleet", func(t *testing.T) { expectFailure(t, checkSkewedFleet, mk, alg, "OVER-ADMISSION") })
			if _, ok := alg.(core.Leaser); ok {
				t.Run("InFlight", func(t *testing.T) { expectFailure(t, checkInFlight, mk, alg, "OVER-ADMISSION") })
			}
		})
	}
}

// A store whose inproc.Binder fast path is not atomic over-admits, though
// its Update is atomic: the suite decides through Take wherever the Limiter
// does.
func TestNonAtomicBinderOverAdmits(t *testing.T) {
	mk := maker(racyBinder, Capabilities{ClockSkew: time.Second}, false)
	for _, alg := range []core.Algorithm{algorithm.FixedWindow{}, algorithm.GCRA{}} {
		t.Run(alg.Name(), func(t *testing.T) { expectFailure(t, checkAdmission, mk, alg, "OVER-ADMISSION") })
	}
}

// A Binder whose Take writes another key than Update and Delete fails
// Reset.
func TestStrayBinderFailsReset(t *testing.T) {
	expectFailure(t, checkReset, maker(strayBinder, Capabilities{}, false), algorithm.TokenBucket{}, "after Reset")
}

// A client that trusts its own copy of a key disagrees with the rest of the
// fleet: the step-by-step comparison (calls alternate between two clients)
// and the admission check catch it.
func TestCachingClientDisagrees(t *testing.T) {
	mk := maker(caching, Capabilities{}, false)
	for _, alg := range []core.Algorithm{algorithm.SlidingLog{}, algorithm.TokenBucket{}, algorithm.Concurrency{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			t.Run("Steps", func(t *testing.T) { expectFailure(t, checkSteps, mk, alg, "Go step") })
			t.Run("Admission", func(t *testing.T) { expectFailure(t, checkAdmission, mk, alg, "OVER-ADMISSION") })
		})
	}
}

// A store whose Delete does nothing fails Reset, with and without an
// Inspector.
func TestForgetfulDeleteFailsReset(t *testing.T) {
	for _, inspect := range []bool{false, true} {
		mk := maker(forgetful, Capabilities{}, inspect)
		expectFailure(t, checkReset, mk, algorithm.FixedWindow{}, "after Reset")
	}
}

// A store that keeps keys far past their TTL fails Expiry.
func TestImmortalKeysFailExpiry(t *testing.T) {
	defer func(g time.Duration) { expiryGrace = g }(expiryGrace)
	expiryGrace = time.Second
	immortal := func(testing.TB) Harness {
		s := newRefStore()
		s.ttlScale = 1000
		return inspectingHarness{&harness{backend: s, newClient: plain}}
	}
	check := func(tb testing.TB, e *env) { checkExpiry(tb, e.h, algorithm.All(), false) }
	expectFailure(t, check, immortal, algorithm.GCRA{}, "still exists")
}

// A harness that declares a script path its store does not have, or hides
// one it has, fails the Capabilities check.
func TestCapabilitiesMustBeTrue(t *testing.T) {
	cases := []struct {
		name string
		h    func(testing.TB) Harness
	}{
		{"scripts declared, none", maker(plain, Capabilities{Scripts: true}, false)},
		{"scripts hidden", maker(scripted, Capabilities{}, false)},
		{"no algorithms", maker(plain, Capabilities{Algorithms: []core.Algorithm{}}, false)},
	}
	for _, c := range cases {
		r := record(t, func(tb testing.TB) { checkCapabilities(tb, c.h(tb), c.h(tb).Capabilities().Algorithms) })
		if !r.Failed() {
			t.Errorf("%s: the Capabilities check passed", c.name)
		}
	}
}

// lyingRetry reports a RetryAfter scaled by scale: too short (the retry is
// denied) or too long (an earlier retry is admitted).
type lyingRetry struct {
	core.Algorithm
	scale float64
}

func (a lyingRetry) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	next, ttl, d := a.Algorithm.Step(state, now, n, p)
	d.RetryAfter = time.Duration(float64(d.RetryAfter) * a.scale)
	return next, ttl, d
}

// An algorithm whose RetryAfter is dishonest fails RetryAfter, whichever
// way it lies, though the store is correct.
func TestDishonestRetryAfter(t *testing.T) {
	mk := maker(plain, Capabilities{}, false)
	for _, scale := range []float64{0.5, 2} {
		for _, alg := range []core.Algorithm{algorithm.GCRA{}, algorithm.FixedWindow{}} {
			expectAlgFailure(t, checkRetryAfter, mk, lyingRetry{alg, scale}, alg, "RetryAfter")
		}
	}
}

// shortTTL gives its writes a TTL far shorter than the state lives.
type shortTTL struct{ core.Algorithm }

func (a shortTTL) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	next, ttl, d := a.Algorithm.Step(state, now, n, p)
	return next, ttl / 8, d
}

// An algorithm whose TTL would let a store drop live state fails Steps.
func TestShortTTLFailsSteps(t *testing.T) {
	mk := maker(plain, Capabilities{}, false)
	expectAlgFailure(t, checkSteps, mk, shortTTL{algorithm.SlidingLog{}}, algorithm.SlidingLog{}, "may be dropped")
}

// A store whose TTLs are shorter than its states live fails Retention, for
// every algorithm: a hundredth of the TTL, and three quarters (but the
// sliding counter, whose state outlives its denial by up to a window, as
// the suite's doc says). The reference store passes it in
// TestReferenceStore.
func TestShortTTLStoreFailsRetention(t *testing.T) {
	for _, scale := range []float64{0.01, 0.75} {
		t.Run(fmt.Sprint(scale), func(t *testing.T) {
			t.Parallel() // each waits out its states
			s := newRefStore()
			s.ttlScale = scale
			h := &harness{backend: s, newClient: plain, caps: Capabilities{ClockSkew: time.Second}}
			r := record(t, func(tb testing.TB) { checkRetention(tb, h, algorithm.All(), false) })
			for _, alg := range algorithm.All() {
				if _, sc := alg.(algorithm.SlidingCounter); sc && scale > 0.5 {
					continue
				}
				if !strings.Contains(r.String(), alg.Name()+": OVER-ADMISSION") {
					t.Errorf("%s: TTLs scaled by %v passed Retention:\n%s", alg.Name(), scale, r)
				}
			}
		})
	}
}
