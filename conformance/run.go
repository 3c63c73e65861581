package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Run runs the conformance suite against the store that newHarness gives.
// It is meant to be called from the store's own test:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, newHarness) }
//
// Subtests are named <path>/<algorithm>/<check>, where path is "generic"
// (store.Store.Update) or "script" (store.ScriptRunner), so that one failing
// pair can be rerun with -run. newHarness is called for the whole run (its
// Capabilities), once in every <path>/<algorithm> subtest and in every check
// run once per path (<path>/<check>), with that subtest's t; in an
// algorithm's subtest the suite takes three NewStore clients (a fleet of three instances),
// which every check of the algorithm shares, each with keys and Limiters of
// its own. Clients are made once per algorithm rather than once per check
// because connecting is among the dearest things the suite does (a cluster
// client costs as much as dozens of decisions). Run uses no t.Parallel, so
// the harness need not be safe for concurrent use. In a process that the
// Processes check started (the test binary run again, with the test that
// called Run selected), Run makes one client, decides its share of the
// check's calls and returns, running nothing else: the test should do
// nothing after Run that the check's processes must not.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	test, ordinal := t.Name(), runOrdinal(t)
	if asProcess(t, ordinal, newHarness) {
		return // a process of a Processes check: it did its part, or had none here
	}
	caps := newHarness(t).Capabilities()
	algs := caps.Algorithms
	if algs == nil {
		algs = algorithm.All()
	}
	t.Run("Capabilities", func(t *testing.T) { checkCapabilities(t, newHarness(t), algs) })
	for _, script := range pathsOf(caps) {
		t.Run(pathName(script), func(t *testing.T) {
			for _, alg := range algs {
				if alg == nil {
					continue // checkCapabilities reports it
				}
				t.Run(alg.Name(), func(t *testing.T) {
					if _, ok := alg.(core.Scripted); script && !ok {
						t.Skipf("%s has no Lua twin: the generic path covers it", alg.Name())
					}
					e := newEnv(t, newHarness(t), alg, script)
					for _, c := range checks {
						if why := c.skip(alg, caps, script); why != "" {
							// Named, so that a report can say why it did not run.
							t.Run(c.name, func(t *testing.T) { t.Skip(why) })
							continue
						}
						t.Run(c.name, func(t *testing.T) { c.fn(t, e) })
					}
				})
			}
			for _, c := range pathChecks {
				t.Run(c.name, func(t *testing.T) { c.fn(t, newHarness(t), algs, script) })
			}
			t.Run("Processes", func(t *testing.T) { checkProcesses(t, test, ordinal, newHarness(t), algs, script) })
		})
	}
}

// check is one leaf of the suite. skip says why the check does not apply
// to an algorithm on a path ("" when it does); the check then runs as a
// subtest that skips with that reason, so that every report can say it.
type check struct {
	name string
	skip func(a core.Algorithm, c Capabilities, script bool) string
	fn   func(testing.TB, *env)
}

func always(core.Algorithm, Capabilities, bool) string { return "" }

func isLeaser(a core.Algorithm, _ Capabilities, _ bool) string {
	if _, ok := a.(core.Leaser); ok {
		return ""
	}
	return a.Name() + " holds no leases"
}

func skewed(_ core.Algorithm, c Capabilities, _ bool) string {
	switch {
	case c.OneClock:
		return "Capabilities.OneClock: every instance decides by one clock, so no two can disagree"
	case c.ClockSkew <= 0:
		return "Capabilities declares no ClockSkew (the Capabilities check fails such a harness)"
	}
	return ""
}

func generic(_ core.Algorithm, _ Capabilities, script bool) string {
	if script {
		return "on the script path the server's clock decides, or the one Clock the Limiter sends; no instance's clock is stored"
	}
	return ""
}

var checks = []check{
	{"Admission", always, checkAdmission},
	{"AdmissionNoClock", always, checkAdmissionNoClock},
	{"AdmissionSkewedFleet", skewed, checkSkewedFleet},
	{"FastClock", generic, checkFastClock},
	{"InFlight", isLeaser, checkInFlight},
	{"InFlightNoClock", isLeaser, checkInFlightNoClock},
	{"LeaseReclaim", isLeaser, checkLeaseReclaim},
	{"Steps", always, checkSteps},
	{"RetryAfter", always, checkRetryAfter},
	{"BadInput", always, checkBadInput},
	{"Identities", always, checkIdentities},
	{"Sizes", always, checkSizes},
	{"Reset", always, checkReset},
	{"Refunds", refundable, checkRefunds},
	{"RefundAcrossEdge", refundable, checkRefundEdge},
}

// pathChecks run once per path, over every algorithm at once.
var pathChecks = []struct {
	name string
	fn   func(t *testing.T, h Harness, algs []core.Algorithm, script bool)
}{
	{"Expiry", func(t *testing.T, h Harness, algs []core.Algorithm, script bool) { checkExpiry(t, h, algs, script) }},
	{"Retention", func(t *testing.T, h Harness, algs []core.Algorithm, script bool) { checkRetention(t, h, algs, script) }},
	{"LongTTL", func(t *testing.T, h Harness, algs []core.Algorithm, script bool) { checkLongTTL(t, h, algs, script) }},
	{"Multi", func(t *testing.T, h Harness, algs []core.Algorithm, script bool) {
		checkMulti(t, h, multiAlgs(algs), script)
	}},
}

// CheckNames returns the names of Run's checks, for a tool that selects
// some (-run): perAlgorithm run under each algorithm, on each path
// (TestX/<path>/<algorithm>/<check>); perPath run once on each path, over
// every algorithm (TestX/<path>/<check>).
func CheckNames() (perAlgorithm, perPath []string) {
	for _, c := range checks {
		perAlgorithm = append(perAlgorithm, c.name)
	}
	for _, c := range pathChecks {
		perPath = append(perPath, c.name)
	}
	return perAlgorithm, append(perPath, "Processes")
}

func pathsOf(c Capabilities) []bool {
	if c.Scripts {
		return []bool{false, true}
	}
	return []bool{false}
}

func pathName(script bool) string {
	if script {
		return "script"
	}
	return "generic"
}

// checkCapabilities holds the harness to what it declared.
func checkCapabilities(t testing.TB, h Harness, algs []core.Algorithm) {
	caps := h.Capabilities()
	s := h.NewStore(t)
	if s == nil {
		t.Fatalf("NewStore returned nil")
	}
	_, runner := s.(store.ScriptRunner)
	switch {
	case caps.Scripts && !runner:
		t.Errorf("Capabilities.Scripts is set but the store (%T) is not a store.ScriptRunner", s)
	case !caps.Scripts && runner:
		t.Errorf("the store (%T) is a store.ScriptRunner: set Capabilities.Scripts so that the suite checks both paths", s)
	}
	switch {
	case caps.ClockSkew < 0:
		t.Errorf("Capabilities.ClockSkew is negative (%v)", caps.ClockSkew)
	case caps.OneClock && caps.ClockSkew != 0:
		t.Errorf("Capabilities declares OneClock and a ClockSkew of %v: one clock cannot disagree with itself", caps.ClockSkew)
	case !caps.OneClock && caps.ClockSkew == 0:
		t.Errorf("Capabilities declares neither ClockSkew nor OneClock: declare how far apart the fleet's clocks may be " +
			"(ClockSkew), or that every instance reads one clock (OneClock), so that the skewed-fleet check is run or skipped for a stated reason")
	}
	if sk, ok := s.(store.ClockSkewer); ok && !caps.OneClock && sk.ClockSkew() != caps.ClockSkew {
		t.Errorf("the store (%T) allows for a clock skew of %v (store.ClockSkewer), but Capabilities.ClockSkew declares %v: "+
			"the suite checks the fleet the harness declares, and the Limiter clamps by what the store says; declare the store's", s, sk.ClockSkew(), caps.ClockSkew)
	}
	if len(algs) == 0 {
		t.Errorf("Capabilities.Algorithms is empty but not nil: the store would be checked against nothing")
	}
	seen := map[string]bool{}
	for _, a := range algs {
		if a == nil {
			t.Errorf("Capabilities.Algorithms holds a nil algorithm")
			continue
		}
		if seen[a.Name()] {
			t.Errorf("Capabilities.Algorithms lists %q twice", a.Name())
		}
		seen[a.Name()] = true
	}
}

// Names and bounds shared by the checks.
const (
	keyPrefix = "sluice-conformance"
	// callTimeout is each store call's deadline: generous, because the suite
	// checks what a store decides, not how fast, and a loaded machine running
	// hundreds of calls at once must not turn into a failure.
	callTimeout = 20 * time.Second
	// fleetSize is how many instances (Limiters on separate NewStore
	// clients) share a key in the concurrent checks.
	fleetSize = 3
	// concurrentCalls is how many calls hit one key at once.
	concurrentCalls = 200
)

// epoch is where ManualClocks start: 20 minutes into an hour, so that no
// window of an hour (or any divisor of one) is about to end, and keys a
// store expires by its own clock are written with long TTLs. It lies
// decades ahead of the system clock, so that a store that sweeps expired
// keys by that clock (store/memory does, once a minute, when its
// Options.Clock is unset, and a harness cannot give it the suite's
// clocks) finds none of the suite's states expired before their time: a
// ManualClock behind the system clock had every one look expired to it.
// 2054 has 2026's calendar (28 years on), and its µs are well below 2^52.
var epoch = time.Date(2054, time.March, 14, 15, 20, 0, 0, time.UTC)

// env is what the checks of one algorithm on one path work with: the
// harness, its fleet of clients, the algorithm and the path.
type env struct {
	h      Harness
	caps   Capabilities
	stores []store.Store // fleetSize clients of the backend, each an instance
	alg    core.Algorithm
	leaser core.Leaser // alg, when it holds leases
	script bool
	// model is alg as the Limiters on this path step it, the specification
	// the decisions are compared with: clamped for the store's clock skew
	// on the generic path of a store.ClockSkewer (core.WithClockSkew).
	model core.Algorithm
}

// newEnv takes fleetSize clients from h; they are closed when t ends.
func newEnv(t testing.TB, h Harness, alg core.Algorithm, script bool) *env {
	t.Helper()
	e := &env{h: h, caps: h.Capabilities(), alg: alg, script: script}
	e.leaser, _ = alg.(core.Leaser)
	for range fleetSize {
		s := h.NewStore(t)
		if s == nil {
			t.Fatalf("NewStore returned nil")
		}
		e.stores = append(e.stores, s)
	}
	e.model = alg
	if sk, ok := e.stores[0].(store.ClockSkewer); ok && !script {
		e.model = core.WithClockSkew(alg, max(sk.ClockSkew(), 0))
	}
	return e
}

// limiter returns a Limiter on s.
func (e *env) limiter(t testing.TB, s store.Store, p core.Policy, clock core.Clock) *core.Limiter {
	t.Helper()
	return e.limiterUnder(t, keyPrefix, s, p, clock)
}

// limiterUnder is limiter with a key prefix of its own.
func (e *env) limiterUnder(t testing.TB, prefix string, s store.Store, p core.Policy, clock core.Clock) *core.Limiter {
	t.Helper()
	l, err := core.New(core.Config{
		Policy: p, Algorithm: e.alg, Store: s, Prefix: prefix, Clock: clock,
		Timeout: callTimeout, NoScript: !e.script,
	})
	if err != nil {
		t.Fatalf("%s: core.New(%v): %v", e.alg.Name(), p, err)
	}
	return l
}

// fleet returns one Limiter per clock, each on a client of its own (up to
// fleetSize): separate instances of one deployment.
func (e *env) fleet(t testing.TB, p core.Policy, clocks ...core.Clock) []*core.Limiter {
	t.Helper()
	ls := make([]*core.Limiter, len(clocks))
	for i, c := range clocks {
		ls[i] = e.limiter(t, e.stores[i%len(e.stores)], p, c)
	}
	return ls
}

// same returns n copies of c.
func same(c core.Clock, n int) []core.Clock {
	cs := make([]core.Clock, n)
	for i := range cs {
		cs[i] = c
	}
	return cs
}

// identity returns an identity no other run uses (the test's name and a
// random suffix) and deletes its state through l when the test ends, when
// the store can delete.
func identity(t testing.TB, l *core.Limiter) string {
	id := fmt.Sprintf("%s#%016x", t.Name(), rand.Uint64())
	forget(t, l, id)
	return id
}

// forget deletes id's state through l when the test ends, if the store can.
func forget(t testing.TB, l *core.Limiter, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_ = l.Reset(ctx, id)
	})
}

// quota is what a Limiter on p would report as Quota.
func (e *env) quota(p core.Policy) int64 { return e.alg.Quota(&p) }

// fresh is the Go step's decision for a key with no state.
func (e *env) fresh(p core.Policy, now time.Time, n int64) core.Decision {
	if e.leaser != nil {
		_, _, d := e.leaser.Acquire(nil, now.UnixMicro(), 1, &p)
		return d
	}
	_, _, d := e.alg.Step(nil, now.UnixMicro(), n, &p)
	return d
}

// take asks l for n units (Acquire for a Leaser, with n ignored) and fails
// the test on an error.
func (e *env) take(t testing.TB, l *core.Limiter, id string, n int64) (core.Decision, *core.Lease) {
	t.Helper()
	d, ls, err := e.try(t.Context(), l, id, n)
	if err != nil {
		t.Fatalf("%s: %v", e.alg.Name(), err)
	}
	return d, ls
}

// try is take for any goroutine: it returns the error, saying which call
// made it, instead of failing the test.
func (e *env) try(ctx context.Context, l *core.Limiter, id string, n int64) (core.Decision, *core.Lease, error) {
	if e.leaser != nil {
		ls, d, err := l.Acquire(ctx, id)
		if err != nil {
			return d, nil, fmt.Errorf("%s: %w", "Acquire", err)
		}
		return d, ls, nil
	}
	d, err := l.AllowN(ctx, id, n)
	if err != nil {
		return d, nil, fmt.Errorf("%s(%d): %w", "AllowN", n, err)
	}
	return d, nil, nil
}
