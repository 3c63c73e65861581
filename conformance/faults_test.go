package conformance

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
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

// namespaceBlindStore keeps one state per identity, whatever its
// namespace, as a store that keys by Key.Identity alone would.
type namespaceBlindStore struct{ *refStore }

func (s namespaceBlindStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	key.Namespace = "blind"
	return s.refStore.Update(ctx, key, m)
}

func (s namespaceBlindStore) Delete(ctx context.Context, key store.Key) error {
	key.Namespace = "blind"
	return s.refStore.Delete(ctx, key)
}

// A store that drops the namespace mixes one identity's states under
// different policies (a strict login limit spent by an API's requests):
// Identities catches it, for every algorithm.
func TestNamespaceBlindStoreFailsIdentities(t *testing.T) {
	mk := maker(func(s *refStore) store.Store { return namespaceBlindStore{s} }, Capabilities{}, false)
	for _, alg := range algorithm.All() {
		t.Run(alg.Name(), func(t *testing.T) { expectFailure(t, checkIdentities, mk, alg, "several namespaces") })
	}
}

// mappedStore keys its states by what key maps to, as a store that
// rewrites keys would.
type mappedStore struct {
	*refStore
	key func(store.Key) store.Key
}

func (s mappedStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	return s.refStore.Update(ctx, s.key(key), m)
}

func (s mappedStore) Delete(ctx context.Context, key store.Key) error {
	return s.refStore.Delete(ctx, s.key(key))
}

// A store that folds case (a case-insensitive column) mixes identities
// that differ only in case, and one that joins the namespace and the
// identity with a separator mixes "p:a" and "b" with "p" and "a:b" (a
// Prefix may hold the separator); so do one that joins them with none or
// with "::", folds a namespace's case or cuts it short: Identities
// catches each.
func TestMangledKeysFailIdentities(t *testing.T) {
	for _, c := range []struct {
		name string
		key  func(store.Key) store.Key
		want string
	}{
		{"case folded", func(k store.Key) store.Key { k.Identity = strings.ToLower(k.Identity); return k }, "share state"},
		{"namespace and identity joined", func(k store.Key) store.Key {
			return store.Key{Identity: k.Namespace + ":" + k.Identity}
		}, "several namespaces"},
		{"joined with no separator", func(k store.Key) store.Key { return store.Key{Identity: k.Namespace + k.Identity} }, "several namespaces"},
		{"joined with '::'", func(k store.Key) store.Key { return store.Key{Identity: k.Namespace + "::" + k.Identity} }, "several namespaces"},
		{"namespace case folded", func(k store.Key) store.Key { k.Namespace = strings.ToLower(k.Namespace); return k }, "several namespaces"},
		{"namespace cut to 64 bytes", func(k store.Key) store.Key { k.Namespace = k.Namespace[:min(64, len(k.Namespace))]; return k }, "several namespaces"},
		{"identity made UTF-8", func(k store.Key) store.Key { k.Identity = strings.ToValidUTF8(k.Identity, "\uFFFD"); return k }, "share state"},
		{"spaces made '_'", func(k store.Key) store.Key { k.Identity = strings.ReplaceAll(k.Identity, " ", "_"); return k }, "share state"},
		{"identity unescaped", func(k store.Key) store.Key {
			if d, err := url.PathUnescape(k.Identity); err == nil {
				k.Identity = d
			}
			return k
		}, "share state"},
		{"identity's last 64 bytes", func(k store.Key) store.Key { k.Identity = k.Identity[max(0, len(k.Identity)-64):]; return k }, "share state"},
		{"namespace's '.' made '-'", func(k store.Key) store.Key { k.Namespace = strings.ReplaceAll(k.Namespace, ".", "-"); return k }, "several namespaces"},
	} {
		mk := maker(func(s *refStore) store.Store { return mappedStore{s, c.key} }, Capabilities{}, false)
		for _, alg := range algorithm.All() {
			t.Run(c.name+"/"+alg.Name(), func(t *testing.T) { expectFailure(t, checkIdentities, mk, alg, c.want) })
		}
	}
}

// A store that cuts keys at 128 bytes counts two long policy names that
// differ at their end on one key, and one that cuts states at 1,024 bytes
// reads a long sliding log, or many leases, as one with room: Sizes
// catches each.
func TestCutKeysAndStatesFailSizes(t *testing.T) {
	keys := makerOf(func() *refStore { s := newRefStore(); s.keyCap = 128; return s }, plain, Capabilities{}, false)
	for _, alg := range algorithm.All() {
		t.Run("keys/"+alg.Name(), func(t *testing.T) { expectFailure(t, checkSizes, keys, alg, "OVER-COUNT") })
	}
	values := makerOf(func() *refStore { s := newRefStore(); s.valueCap = 1024; return s }, plain, Capabilities{}, false)
	for _, alg := range []core.Algorithm{algorithm.SlidingLog{}, algorithm.Concurrency{}} {
		t.Run("states/"+alg.Name(), func(t *testing.T) { expectFailure(t, checkSizes, values, alg, "OVER-ADMISSION") })
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

// A store that caps every TTL at two days keeps the seconds-long states of
// Expiry and Retention, and the states of a day's policy, and drops a
// drained key of a month's policy after two days: LongTTL catches it on
// both paths, for every algorithm, and skips without a TTLInspector.
func TestCappedTTLFailsLongTTL(t *testing.T) {
	for _, script := range []bool{false, true} {
		for _, inspect := range []bool{true, false} {
			newClient := plain
			if script {
				newClient = scripted
			}
			capped := makerOf(func() *refStore { s := newRefStore(); s.ttlCap = 48 * time.Hour; return s }, newClient, Capabilities{Scripts: script}, inspect)
			r := record(t, func(tb testing.TB) { checkLongTTL(tb, capped(tb), algorithm.All(), script) })
			if !inspect {
				if !r.Skipped() {
					t.Errorf("script %v: LongTTL ran without a TTLInspector: %s", script, r)
				}
				continue
			}
			// The aligned windows (counted from the Unix epoch) drained in
			// their last minutes are skipped by the check, saying so.
			windowEnd := longWindow - time.Duration(time.Now().UnixNano())%longWindow
			for _, alg := range algorithm.All() {
				aligned := alg.Name() == "fixed-window" || alg.Name() == "sliding-counter"
				if aligned && windowEnd < longLeast+time.Minute {
					continue
				}
				if !strings.Contains(r.String(), alg.Name()+": OVER-ADMISSION") {
					t.Errorf("script %v: LongTTL did not catch a TTL capped at two days for %s:\n%s", script, alg.Name(), r)
				}
			}
			good := makerOf(newRefStore, newClient, Capabilities{Scripts: script}, true)
			if r := record(t, func(tb testing.TB) { checkLongTTL(tb, good(tb), algorithm.All(), script) }); r.Failed() {
				t.Errorf("script %v: LongTTL failed the reference store:\n%s", script, r)
			}
		}
	}
}

// A store that keeps a live key's first expiry when a later write asks a
// longer one (an upsert that sets the value alone) drops a drained
// bucket when its first unit is back, not when it is whole: LongTTL,
// which holds the TTL to the denial's ResetAfter, catches it.
func TestKeptFirstTTLFailsLongTTL(t *testing.T) {
	kept := makerOf(func() *refStore { s := newRefStore(); s.keepTTL = true; return s }, plain, Capabilities{}, true)
	algs := []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}}
	r := record(t, func(tb testing.TB) { checkLongTTL(tb, kept(tb), algs, false) })
	for _, alg := range algs {
		if !strings.Contains(r.String(), alg.Name()+": OVER-ADMISSION") {
			t.Errorf("LongTTL did not catch a kept first TTL for %s:\n%s", alg.Name(), r)
		}
	}
}

// A harness that declares a script path its store does not have, or hides
// one it has, or a clock skew its store does not allow for, fails the
// Capabilities check, each for its own reason.
func TestCapabilitiesMustBeTrue(t *testing.T) {
	cases := []struct {
		name, want string
		h          func(testing.TB) Harness
	}{
		{"scripts declared, none", "not a store.ScriptRunner", maker(plain, Capabilities{Scripts: true, ClockSkew: time.Second}, false)},
		{"scripts hidden", "set Capabilities.Scripts", maker(scripted, Capabilities{ClockSkew: time.Second}, false)},
		{"no algorithms", "empty but not nil", maker(plain, Capabilities{ClockSkew: time.Second, Algorithms: []core.Algorithm{}}, false)},
		{"a skew the store does not allow for", "allows for a clock skew of 720h0m0s", makerOf(func() *refStore {
			s := newRefStore()
			s.skew = 30 * 24 * time.Hour
			return s
		}, plain, Capabilities{ClockSkew: time.Second}, false)},
	}
	for _, c := range cases {
		algs := c.h(t).Capabilities().Algorithms
		if algs == nil {
			algs = algorithm.All() // as Run resolves them
		}
		r := record(t, func(tb testing.TB) { checkCapabilities(tb, c.h(tb), algs) })
		if !r.Failed() || !strings.Contains(r.String(), c.want) {
			t.Errorf("%s: the Capabilities check failed = %v, want it to fail saying %q:\n%s", c.name, r.Failed(), c.want, r)
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
// the suite's doc says), also when it lengthens them by the second of
// clock skew it declares, as a store on the limiters' clocks does (a
// window of 1.5 s would hide the quarter under that second). The
// reference store passes it in TestReferenceStore.
func TestShortTTLStoreFailsRetention(t *testing.T) {
	for _, c := range []struct {
		scale   float64
		addSkew bool
	}{{0.01, false}, {0.75, false}, {0.75, true}} {
		scale := c.scale
		t.Run(fmt.Sprint(scale, map[bool]string{true: "+skew"}[c.addSkew]), func(t *testing.T) {
			t.Parallel() // each waits out its states
			s := newRefStore()
			s.ttlScale, s.skew, s.addSkew = scale, time.Second, c.addSkew
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

// A store that keeps TTLs in whole seconds, and so writes nothing for a
// state that lives less than one, fails Retention for every algorithm:
// under a sub-second window it admits without limit. (Its states of a
// second and more live up to a second less than they should, which the
// first case above catches at a quarter.)
func TestSecondsTTLStoreFailsRetention(t *testing.T) {
	t.Parallel() // it waits out its states
	s := newRefStore()
	s.seconds, s.skew = true, 10*time.Millisecond
	h := &harness{backend: s, newClient: plain, caps: Capabilities{ClockSkew: s.skew}}
	r := record(t, func(tb testing.TB) { checkRetention(tb, h, algorithm.All(), false) })
	for _, alg := range algorithm.All() {
		if !strings.Contains(r.String(), alg.Name()+": OVER-ADMISSION: 20 requests in a row") {
			t.Errorf("%s: TTLs in whole seconds passed Retention:\n%s", alg.Name(), r)
		}
	}
}

// slowStore answers every Update after a delay.
type slowStore struct{ *refStore }

func (s slowStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	time.Sleep(700 * time.Millisecond)
	return s.refStore.Update(ctx, key, m)
}

// A store too slow for Retention to ask its questions before the denial
// ends fails it, rather than pass having seen nothing.
func TestRetentionFailsAStoreTooSlowToAsk(t *testing.T) {
	t.Parallel()
	s := newRefStore()
	s.skew = 10 * time.Millisecond
	h := &harness{backend: s, newClient: func(s *refStore) store.Store { return slowStore{s} }, caps: Capabilities{ClockSkew: s.skew}}
	r := record(t, func(tb testing.TB) { checkRetention(tb, h, []core.Algorithm{algorithm.GCRA{}}, false) })
	if !r.Failed() || !strings.Contains(r.String(), "too slow") {
		t.Fatalf("Retention over a store that answers in 700 ms: failed %v, want it to say it was too slow:\n%s", r.Failed(), r)
	}
}
