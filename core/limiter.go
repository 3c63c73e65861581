package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/store"
)

// DefaultTimeout is the per-call deadline when Config.Timeout is zero.
const DefaultTimeout = 100 * time.Millisecond

// DefaultPrefix starts every store key when Config.Prefix is empty.
const DefaultPrefix = "sluice"

// FailureMode says what a Limiter does when its store cannot decide.
type FailureMode int

const (
	// FailClosed returns the store's error (matching ErrUnavailable); the
	// HTTP adapters answer 503. The default.
	FailClosed FailureMode = iota
	// FailOpen admits the request with Decision.Degraded set, and reports
	// the store's error to the Observer.
	FailOpen
	// FailFallback asks Config.Fallback (for example a memory limiter at a
	// fraction of the global limit) and marks its decision Degraded.
	FailFallback
)

func (m FailureMode) String() string {
	switch m {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case FailFallback:
		return "fallback"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// Event is what an Observer hears after every decision.
type Event struct {
	Policy   string
	Op       string // "allow", "acquire", "release"
	Decision Decision
	// Err is the store's error when the failure policy decided (Degraded),
	// or the error returned to the caller.
	Err error
	// Duration is how long the store call took, failure policy included.
	// Zero for a decision that made no store call: a refusal by the deny
	// cache or the pre-filter, and every decision of an in-process store
	// (the memory store's, whatever the call: Allow, Charge, Acquire,
	// Release, a Multi's).
	Duration time.Duration
	// Shadowed reports that the store refused and the Limiter, in shadow
	// mode (Config.Shadow), admitted: Decision is the admission returned.
	Shadowed bool
	// DenyCached reports a refusal by the deny cache (Config.DenyCache),
	// and PreFiltered one by the pre-filter (Config.PreFilter): decided in
	// process, with no store call.
	DenyCached, PreFiltered bool
	// Limits is, for a Multi's decision, each limit's part, of which
	// Decision is the most constraining: an Observer that judges each limit
	// (near its limit, say) reads them here. It is the slice the caller
	// gets: read it during the call only. Nil for a Limiter's decision.
	Limits []LimitState
}

// NearLimit reports whether e is an admission after which the identity
// has used more than ⌊Limit × ratio⌋ of its limit, or, for a Multi's, of
// any of its limits: envoy ratelimit's near_limit, which the observers
// count. A shadow admission is not near its limit (it was a refusal), and
// neither is a degraded one (nothing is known of the store).
func (e *Event) NearLimit(ratio float64) bool {
	d := &e.Decision
	if !d.Allowed || d.Degraded || e.Shadowed || e.Err != nil {
		return false
	}
	near := func(d *Decision) bool {
		return d.Limit > 0 && d.Limit-d.Remaining > int64(math.Floor(float64(d.Limit)*ratio))
	}
	if near(d) {
		return true
	}
	for i := range e.Limits {
		if near(&e.Limits[i].Decision) {
			return true
		}
	}
	return false
}

// Config configures a Limiter. Policy, Algorithm and Store are required.
type Config struct {
	Policy    Policy
	Algorithm Algorithm
	// Store holds the state. When it is also a ScriptRunner and Algorithm is
	// Scripted, each decision is one server-side script.
	Store store.Store
	// Prefix starts every key. Default DefaultPrefix. Two limiters with the
	// same prefix and policy name share counters, across processes too. 1 to
	// 64 characters from [A-Za-z0-9._:-]: no brace (it would move every key
	// into one Redis Cluster slot), no space or control character (memcached
	// refuses them).
	Prefix string
	// Clock is read once per decision. Nil means: the server's clock for a
	// script (so instances with skewed clocks agree), SystemClock otherwise.
	// A network store (Redis, Valkey, memcached) still expires keys by the
	// server's real clock, whatever Clock says: a TTL is a duration the
	// server counts down in real time. An injected clock that lags real
	// time, or runs faster or slower, therefore changes decisions: a key
	// the Limiter's time line still needs may be gone (it reads as fresh),
	// and one it no longer needs may still be there. Inject a Clock into a
	// Limiter over a network store only for tests whose waits are far
	// shorter than the policy's TTLs. A TTL is what the state still needs,
	// not the window: a calendar quota's key lives until its period ends on
	// the injected clock, so a clock set a moment before midnight gives the
	// day's key a moment to live in real time.
	Clock Clock
	// Timeout is the deadline of each store call. Default DefaultTimeout;
	// negative means none (the caller's context alone). Ignored for
	// InProcess stores, and when the caller's context ends sooner. A call
	// whose context can never be cancelled (context.Background, or one that
	// only carries values) shares its deadline with the calls that start
	// within Timeout/64 (at most 1 ms) of it, so its deadline may fall up to
	// that much after Timeout, never before; it costs no allocation where a
	// context.WithTimeout costs five.
	Timeout time.Duration
	// Failure is what happens when the store cannot decide.
	Failure FailureMode
	// Fallback decides when Failure is FailFallback. It should not share the
	// failing store: a memory limiter is the usual choice. Its decisions are
	// marked Degraded; a cost above its Quota (yet within this limiter's) is
	// a degraded refusal. This limiter's Observer hears them, Degraded: give
	// the fallback no Observer of its own, or each is counted twice
	// (guard.FleetFallback leaves it out).
	Fallback *Limiter
	// DenyCache, when set, holds the store's refusals in process and
	// refuses the same identity again without a store call until their
	// RetryAfter (see DenyCacheOptions). Nil means none.
	DenyCache *DenyCacheOptions
	// PreFilter, when set, is asked first by AllowN: what it refuses is
	// refused without a store call; what it admits goes on to the store.
	// A loose in-process limit that catches floods; guard.PreFilter
	// builds one sized to the fleet, and says how to size it so that it
	// never refuses what the global limit would admit. Nil means none.
	// Ignored over an InProcess store. A refusal it makes carries this
	// limiter's Limit, but Remaining 0 and the pre-filter's own RetryAfter
	// and ResetAfter: the store, which holds the global count, was not
	// asked. As for Fallback, give it no Observer of its own (this
	// limiter reports its refusals, PreFiltered).
	PreFilter *Limiter
	// Observer, when set, is called after every decision. It must be fast
	// and safe for concurrent use.
	Observer func(Event)
	// Shadow decides and reports but never refuses: a refusal is returned
	// as an admission and the Observer hears it with Event.Shadowed, and a
	// store failure the failure policy would return is a degraded
	// admission (see shadow.go). For the dark launch of a new limit.
	Shadow bool
	// NoScript forces the generic read-modify-write path even when the
	// store and algorithm could run a script.
	//
	// Every instance that shares a policy must decide it the same way: the
	// same algorithm, and the same path. States of different algorithms,
	// and the Go and Lua forms of one algorithm's state, are not
	// interchangeable; a key written one way reads as fresh (or as another
	// algorithm's count) the other way. Two ways at once under one name
	// undo the limit: each write makes the key fresh for the other, so a
	// fleet that mixes them can admit every request, with no error to say
	// so. To change either, give the policy a new Name or the limiter a new
	// Prefix.
	NoScript bool
}

// Limiter enforces one Policy with one Algorithm over one Store. It is safe
// for concurrent use; share one per policy across goroutines.
type Limiter struct {
	cfg    Config
	p      Policy
	alg    Algorithm
	quota  int64
	ns     string
	script *store.Script
	runner store.ScriptRunner
	leaser Leaser
	taker  fieldTaker // the store's fast path for Allow, when it binds (internal/inproc)
	// clocked is taker's path that reads the time under the store's lock,
	// for a step clamped for clock skew; clock is l.now, bound once.
	clocked clockedTaker
	clock   func() int64
	deny    *denyCache
	local   bool
	ticks   atomic.Pointer[tick] // the shared deadline of the current granule (deadline.go)
	resets  resetGate            // Resets so far, and the refunds on their way: a Receipt from before a Reset refunds nothing

	// step is alg as the store's path steps it: clamped for the store's
	// clock skew (skew.go).
	step Algorithm
}

// New validates cfg and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if store.IsNil(cfg.Algorithm) {
		return nil, errors.New("sluice: Config.Algorithm is nil")
	}
	if store.IsNil(cfg.Store) {
		return nil, errors.New("sluice: Config.Store is nil")
	}
	if cfg.Clock != nil && store.IsNil(cfg.Clock) {
		return nil, fmt.Errorf("sluice: Config.Clock is nil (a nil %T): leave Clock unset for the system clock", cfg.Clock)
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if c, ok := cfg.Algorithm.(PolicyChecker); ok {
		if err := c.CheckPolicy(&cfg.Policy); err != nil {
			return nil, err
		}
	}
	switch cfg.Failure {
	case FailClosed, FailOpen:
	case FailFallback:
		if cfg.Fallback == nil {
			return nil, errors.New("sluice: Failure is FailFallback but Config.Fallback is nil")
		}
		if !cfg.Fallback.made() {
			return nil, errors.New("sluice: Config.Fallback was not made by New")
		}
		_, leases := cfg.Algorithm.(Leaser)
		if _, fl := cfg.Fallback.alg.(Leaser); fl != leases {
			return nil, fmt.Errorf("sluice: Config.Fallback decides %s and this limiter %s: a fallback must hold leases exactly when the limiter does", cfg.Fallback.alg.Name(), cfg.Algorithm.Name())
		}
	default:
		return nil, fmt.Errorf("sluice: unknown Failure mode %d", int(cfg.Failure))
	}
	if pf := cfg.PreFilter; pf != nil && !pf.made() {
		return nil, errors.New("sluice: Config.PreFilter was not made by New")
	}
	if pf := cfg.PreFilter; pf != nil && pf.leaser != nil {
		return nil, errors.New("sluice: Config.PreFilter holds leases; a pre-filter must be a rate limiter")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := checkPrefix(cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	l := &Limiter{cfg: cfg, p: cfg.Policy, alg: cfg.Algorithm, ns: store.Namespace(cfg.Prefix, cfg.Policy.Name)}
	l.quota = l.alg.Quota(&l.p)
	l.leaser, _ = cfg.Algorithm.(Leaser)
	_, l.local = cfg.Store.(interface{ InProcess() })
	if s, ok := cfg.Algorithm.(Scripted); ok && !cfg.NoScript {
		if r, ok := cfg.Store.(store.ScriptRunner); ok {
			l.script, l.runner = s.Script(), r
		}
	}
	l.step, l.leaser = clampFor(cfg.Store, l.alg, l.leaser, l.runner != nil || (l.local && cfg.Clock == nil))
	if b, ok := cfg.Store.(binder); ok && l.local && l.runner == nil && l.leaser == nil {
		t := b.Bind(l.ns)
		// A clamped step must read its time under the store's lock (see
		// clockedTaker): only a Limiter with a Clock clamps here. It takes
		// AllowN's slower road, and leaves the fast path as it is.
		if c, ok := t.(clockedTaker); ok && cfg.Clock != nil {
			l.clocked, l.clock = c, l.now
		} else {
			l.taker = fieldsOf(t)
		}
	}
	if cfg.DenyCache != nil && !l.local {
		l.deny = newDenyCache(cfg.DenyCache)
	}
	if l.local {
		l.cfg.PreFilter = nil
	}
	return l, nil
}

// checkPrefix reports a Config.Prefix that would make keys ambiguous or
// unbounded. Its errors match ErrInvalidPolicy: the prefix names the keys
// a policy is counted under, as the policy's own name does.
func checkPrefix(prefix string) error {
	if len(prefix) > MaxNameLen {
		return fmt.Errorf("%w: Config.Prefix must be at most %d characters, got %d", ErrInvalidPolicy, MaxNameLen, len(prefix))
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !nameByte(c) && c != ':' {
			return fmt.Errorf("%w: Config.Prefix may use only A-Z a-z 0-9 . _ - : (byte %d is %q)", ErrInvalidPolicy, i, prefix[i:i+1])
		}
	}
	return nil
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() Policy { return l.p }

// Algorithm returns the limiter's algorithm.
func (l *Limiter) Algorithm() Algorithm { return l.alg }

// Shadow reports whether the limiter is in shadow mode (Config.Shadow):
// it never refuses, so the doors announce none of its fields.
func (l *Limiter) Shadow() bool { return l.cfg.Shadow }

// Quota is the most units one call may ask for (Decision.Limit).
func (l *Limiter) Quota() int64 { return l.quota }

// Key returns the store key for identity.
func (l *Limiter) Key(identity string) store.Key {
	return store.Key{Namespace: l.ns, Identity: identity}
}

// Allow is shorthand for AllowN(ctx, identity, 1).
func (l *Limiter) Allow(ctx context.Context, identity string) (Decision, error) {
	return l.AllowN(ctx, identity, 1)
}

// AllowN decides whether n units are admitted now for identity. A denial is
// a Decision with Allowed false. Errors: ErrInvalidInput for an empty
// identity or n outside 1..Quota() (nothing is written); ErrUnavailable when
// the store could not decide and the failure policy is FailClosed; ctx.Err()
// when ctx ends first (on a store that waits: an in-process store, which
// never does, decides whatever ctx, as it ignores Timeout). In shadow mode
// (Config.Shadow) a refusal is returned as an admission. For the
// concurrency algorithm use Acquire.
func (l *Limiter) AllowN(ctx context.Context, identity string, n int64) (Decision, error) {
	if l.taker != nil {
		// The in-process fast path: no lease, no deadline, no timing.
		if err := l.check(identity, n); err != nil {
			return Decision{}, err
		}
		// The Decision is built where it is returned, never copied whole
		// (see fieldTaker): three literals, not one local or an inlined
		// constructor, which measured 7 ns slower a decision serially.
		a, g, lim, rem, retry, reset, delay, err := l.taker.TakeFields(identity, l.step, l.now(), n, &l.p)
		if err == nil && (!l.cfg.Shadow || a && delay == 0) {
			if l.cfg.Observer != nil {
				l.cfg.Observer(Event{Policy: l.p.Name, Op: "allow", Decision: Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}})
			}
			return Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}, nil
		}
		return l.settle(ctx, identity, n, Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}, err, time.Time{})
	}
	if l.leaser != nil {
		return Decision{}, fmt.Errorf("%w: %s holds leases; use Acquire", ErrUnsupported, l.alg.Name())
	}
	if err := l.check(identity, n); err != nil {
		return Decision{}, err
	}
	if l.clocked != nil {
		return l.allowClocked(ctx, identity, n)
	}
	start := l.timer()
	if l.deny != nil || l.cfg.PreFilter != nil {
		return l.guarded(ctx, identity, n, start)
	}
	d, err := l.do(ctx, store.Key{Namespace: l.ns, Identity: identity}, store.OpTake, n, 0)
	return l.settle(ctx, identity, n, d, err, start)
}

// allowClocked decides AllowN for a Limiter whose Taker reads the
// Limiter's Clock under the store's lock (clockedTaker).
func (l *Limiter) allowClocked(ctx context.Context, identity string, n int64) (Decision, error) {
	a, g, lim, rem, retry, reset, delay, err := l.clocked.TakeFieldsClocked(identity, l.step, l.clock, n, &l.p)
	d := Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}
	if err == nil && (!l.cfg.Shadow || a && delay == 0) {
		if l.cfg.Observer != nil {
			l.cfg.Observer(Event{Policy: l.p.Name, Op: "allow", Decision: d})
		}
		return d, nil
	}
	return l.settle(ctx, identity, n, d, err, time.Time{})
}

// settle finishes a decision of AllowN: the failure policy for a store
// error, shadow mode for a refusal, then the Observer. A zero start means
// the decision was not timed.
func (l *Limiter) settle(ctx context.Context, identity string, n int64, d Decision, storeErr error, start time.Time) (Decision, error) {
	return l.settleFrom(ctx, identity, n, d, storeErr, start, fromStore)
}

// source says who decided: the store, or a guard in front of it.
type source uint8

const (
	fromStore source = iota
	fromDenyCache
	fromPreFilter
)

// settleFrom is settle for a decision made by src.
func (l *Limiter) settleFrom(ctx context.Context, identity string, n int64, d Decision, storeErr error, start time.Time, src source) (Decision, error) {
	err := storeErr
	if err != nil {
		d, err = l.fail(ctx, identity, n, err)
	}
	shadowed := false
	if err == nil && l.cfg.Shadow {
		if !d.Allowed {
			d, shadowed = shadowAdmission(d), true
		} else {
			d.Delay = 0 // a shadow limit does not shape either
		}
	}
	if l.cfg.Observer != nil {
		var dur time.Duration
		if src == fromStore { // a guard's refusal made no store call
			dur = took(start)
		}
		l.cfg.Observer(Event{Policy: l.p.Name, Op: "allow", Decision: d, Err: eventErr(err, storeErr, d), Duration: dur,
			Shadowed: shadowed, DenyCached: src == fromDenyCache, PreFiltered: src == fromPreFilter})
	}
	return d, err
}

// take charges n units as AllowN decides them, for a charge that is part
// of a decision already made and observed (a Settle's shortfall): no
// Observer event, and no deny cache or pre-filter, whose refusal would be
// one nobody asked for. The failure policy and shadow mode apply as in
// AllowN. unknown reports a store call whose outcome is unknown: the store
// may have charged the units, whatever the decision or error returned.
func (l *Limiter) take(ctx context.Context, identity string, n int64) (d Decision, unknown bool, err error) {
	switch {
	case l.taker != nil:
		a, g, lim, rem, retry, reset, delay, e := l.taker.TakeFields(identity, l.step, l.now(), n, &l.p)
		d, err = Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}, e
	case l.clocked != nil:
		a, g, lim, rem, retry, reset, delay, e := l.clocked.TakeFieldsClocked(identity, l.step, l.clock, n, &l.p)
		d, err = Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}, e
	default:
		d, err = l.do(ctx, store.Key{Namespace: l.ns, Identity: identity}, store.OpTake, n, 0)
	}
	if err != nil {
		unknown = errors.Is(err, ErrOutcomeUnknown)
		d, err = l.fail(ctx, identity, n, err)
		return d, unknown, err
	}
	if l.cfg.Shadow && !d.Allowed {
		d = shadowAdmission(d)
	}
	return d, false, nil
}

// timer starts timing a store call for the Observer: the zero time
// (untimed) without one, and for an in-process store, whose decisions are
// not store calls.
func (l *Limiter) timer() time.Time { return timer(l.cfg.Observer != nil, l.local) }

// timer is the start of a store call to time: the zero time unless it is
// observed and the store is not in process.
func timer(observed, local bool) time.Time {
	if !observed || local {
		return time.Time{}
	}
	return time.Now()
}

// took is the time since start, zero for an untimed call.
func took(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return time.Since(start)
}

// eventErr is what an Observer hears: the error returned, or, when the
// failure policy decided instead (Degraded), the store's error behind it.
func eventErr(returned, store error, d Decision) error {
	if returned == nil && d.Degraded {
		return store
	}
	return returned
}

// errLimiterNotMade is what a Limiter that New did not make (a zero
// Limiter) returns: it has no policy, algorithm or store to decide with.
var errLimiterNotMade = errors.New("sluice: the Limiter was not made by New")

// made reports whether New made l. Only the paths that already failed ask
// (a zero Limiter's quota is 0, so check refuses every cost), which keeps
// the question off the decision's fast path.
func (l *Limiter) made() bool { return l != nil && l.alg != nil }

// check returns an *InputError when identity or n cannot be decided. The
// test that passes is small enough to inline; the errors are built apart.
func (l *Limiter) check(identity string, n int64) error {
	if identity != "" && n >= 1 && n <= l.quota {
		return nil
	}
	return l.inputError(identity, n)
}

// costBelowOne is the error of a cost n < 1, wherever a cost is given (a
// Limiter's, a Multi's, a refund's).
func costBelowOne(n int64) error {
	return &InputError{Arg: "n", Reason: fmt.Sprintf("must be at least 1, got %d", n)}
}

func (l *Limiter) inputError(identity string, n int64) error {
	if !l.made() {
		return errLimiterNotMade
	}
	if identity == "" {
		return &InputError{Arg: "key", Reason: "is empty"}
	}
	if n < 1 {
		return costBelowOne(n)
	}
	if n > l.quota {
		return &InputError{Arg: "n", Reason: fmt.Sprintf("%d exceeds the quota %d of policy %q: it could never be admitted", n, l.quota, l.p.Name)}
	}
	return nil
}

// storeFailure classifies an error from the store. When the caller's own
// context has ended, nobody waits for the answer: ctx.Err() is returned and
// the failure policy is not asked (it would admit, or spend a fallback slot,
// for a client that is gone), whatever the store made of the deadline (a
// client that sets it on its socket reports an i/o timeout, not the
// context's error). Anything else, the limiter's own deadline included, is
// a *StoreError (matching ErrUnavailable) for the failure policy. A
// deadline that has passed counts as ended before its context says so: a
// socket set to it times out at the same instant as the context's timer,
// and may be first.
func storeFailure(ctx context.Context, op string, err error) (_ error, callerGone bool) {
	if cerr := ctx.Err(); cerr != nil {
		return cerr, true
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded, true
	}
	if !errors.Is(err, ErrUnavailable) {
		err = &store.Error{Op: op, Err: err}
	}
	return err, false
}

// fail applies the failure policy to a store error.
func (l *Limiter) fail(ctx context.Context, identity string, n int64, err error) (Decision, error) {
	err, gone := storeFailure(ctx, "update", err)
	if gone {
		return Decision{}, err
	}
	if l.cfg.Failure == FailFallback {
		if q := l.cfg.Fallback.Quota(); n > q {
			// Within this limiter's quota but not the fallback's: the
			// fallback could never admit it, which is a refusal (with
			// no wait that would help), not the caller's bad input.
			return Decision{Limit: q, Degraded: true}, nil
		}
		d, ferr := l.cfg.Fallback.AllowN(ctx, identity, n)
		if ferr == nil {
			d.Degraded = true
			return d, nil
		}
		err = errors.Join(err, ferr)
	}
	if l.failsOpen() {
		return Decision{Allowed: true, Limit: l.quota, Degraded: true}, nil
	}
	return Decision{}, err
}

// failsOpen reports whether a store failure that the failure policy leaves
// an error admits instead: under FailOpen, and in shadow mode, whose limit
// never refuses and must not make its store a dependency of the requests
// it watches (see shadow.go).
func (l *Limiter) failsOpen() bool { return l.cfg.Failure == FailOpen || l.cfg.Shadow }

// do runs one operation on the store, with the deadline.
func (l *Limiter) do(ctx context.Context, key store.Key, op int64, n int64, lease uint64) (Decision, error) {
	ctx, cancel := l.deadline(ctx)
	defer cancel()
	return l.call(ctx, key, op, n, lease)
}

// call is do under ctx's own deadline, whatever the limiter's Timeout.
func (l *Limiter) call(ctx context.Context, key store.Key, op int64, n int64, lease uint64) (Decision, error) {
	if l.runner != nil {
		args := NewScriptArgs(&l.p, 0, n)
		if l.cfg.Clock != nil {
			args.Now = scriptNow(l.cfg.Clock.Now().UnixMicro())
		}
		args.Lease, args.Op = lease, op
		r, err := l.runner.RunScript(ctx, l.script, key, args)
		if err != nil {
			return Decision{}, err
		}
		return ScriptDecision(r), nil
	}
	m := mutationPool.Get().(*mutation)
	m.l, m.alg, m.leaser, m.p, m.n, m.lease, m.op = l, l.step, l.leaser, &l.p, n, lease, op
	m.d = Decision{} // a store that never calls Apply must not return a stale decision
	m.now = l.now()
	err := l.cfg.Store.Update(ctx, key, m)
	d := m.d
	m.l, m.alg, m.leaser, m.p = nil, nil, nil, nil // what the pool must not keep alive
	mutationPool.Put(m)
	return d, err
}

// needsDeadline reports whether a store call under ctx needs the limiter's
// own deadline: not for an in-process store, and not when ctx already ends
// sooner.
func (l *Limiter) needsDeadline(ctx context.Context) bool {
	if l.local || l.cfg.Timeout <= 0 {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > l.cfg.Timeout
}

func (l *Limiter) now() int64 {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now().UnixMicro()
	}
	return wallMicros()
}

// Reset deletes identity's state, so its next request meets a fresh quota.
// It returns ErrUnsupported when the store cannot delete. It voids every
// Receipt this Limiter issued before it returns, whatever its identity
// (their Refund returns ErrNotRefunded, a Reservation's Settle refunds
// nothing): their units would go into the state after the Reset, which
// later charges took, or the delete took them (a charge made while a
// Reset runs may land before its delete). A refund already on its way
// when Reset is called lands first: Reset waits for it (for those alone,
// not for refunds of other receipts made meanwhile), within its own
// deadline (Timeout, or ctx's: past it, Reset returns ctx's error and
// deletes nothing; the receipts are void all the same). This order holds for the calls the store answered:
// a refund or a delete that ended in an unknown outcome (its deadline
// passed with the request sent) may still reach the server later, after
// the other, which then takes or credits units it should not (at most
// that refund's). A Reset by another instance cannot void them: refund
// only what was charged since the last Reset anyone made.
func (l *Limiter) Reset(ctx context.Context, identity string) error {
	if !l.made() {
		return errLimiterNotMade
	}
	if identity == "" {
		return &InputError{Arg: "key", Reason: "is empty"}
	}
	d, err := deleterOf(l.cfg.Store)
	if err != nil {
		return err
	}
	ctx, cancel := l.deadline(ctx)
	defer cancel()
	// From before the wait to after the delete: a charge the delete may
	// have taken is refunded by nobody.
	if err := l.resets.begin(ctx); err != nil {
		l.resets.end()
		return err
	}
	err = d.Delete(ctx, store.Key{Namespace: l.ns, Identity: identity})
	l.resets.end()
	if l.deny != nil {
		l.deny.freed(identity) // after the delete: a refusal read before it may be on its way
	}
	if pf := l.cfg.PreFilter; pf != nil {
		// The pre-filter counted what was sent to the store; a fresh quota
		// there must not meet a spent one here.
		if e := pf.Reset(ctx, identity); err == nil && !errors.Is(e, ErrUnsupported) {
			err = e
		}
	}
	return err
}

// deleterOf is s as a store.Deleter, or ErrUnsupported.
func deleterOf(s store.Store) (store.Deleter, error) {
	if d, ok := s.(store.Deleter); ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: the store cannot delete keys", ErrUnsupported)
}

var mutationPool = sync.Pool{New: func() any { return new(mutation) }}

// mutation is one Limiter call, handed to Store.Update. Pooled, so a decision
// on an in-process store allocates nothing.
type mutation struct {
	l      *Limiter
	alg    Algorithm
	leaser Leaser
	p      *Policy
	now, n int64
	lease  uint64
	op     int64
	d      Decision
}

func (m *mutation) Apply(state []byte) ([]byte, time.Duration) {
	var next []byte
	var ttl time.Duration
	switch {
	case m.op == store.OpRelease:
		next, ttl = m.leaser.Release(state, m.now, m.lease, m.p)
		m.d.Allowed = next != nil // the lease was held, and is released (as a script replies)
	case m.leaser != nil:
		next, ttl, m.d = m.leaser.Acquire(state, m.now, m.lease, m.p)
	default:
		next, ttl, m.d = m.alg.Step(state, m.now, m.n, m.p)
	}
	return next, ttl
}

// Now is the time of the decision, in µs since the Unix epoch (see
// internal/inproc.Timed).
func (m *mutation) Now() int64 { return m.now }

// Retime reads the limiter's clock again, before each attempt of
// store.CASUpdate. A mutation built
// without a Limiter keeps its time.
func (m *mutation) Retime() {
	if m.l != nil {
		m.now = m.l.now()
	}
}

// newLeaseID returns a random non-zero lease id.
func newLeaseID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// taker and binder are internal/inproc's Taker and Binder, matched by their
// method sets (that package imports this one): the in-process fast path of
// the memory store, kept out of the documented contracts.
type taker = interface {
	Take(identity string, alg Algorithm, now, n int64, p *Policy) (Decision, error)
}

type binder interface {
	Bind(namespace string) taker
}

// fieldTaker is internal/inproc's FieldTaker: a taker that returns the
// Decision's fields one by one, in registers. A Decision returned whole
// comes back through a stack copy that reads, 16 bytes at a time, what was
// stored a field at a time, and so stalls on store forwarding: that copy
// was a tenth of an in-memory decision.
type fieldTaker = interface {
	TakeFields(identity string, alg Algorithm, now, n int64, p *Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error)
}

// clockedTaker is internal/inproc's ClockedTaker.
type clockedTaker = interface {
	TakeFieldsClocked(identity string, alg Algorithm, clock func() int64, n int64, p *Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error)
}

// fieldsOf returns t as a fieldTaker: t itself when it is one, else t
// behind an adapter.
func fieldsOf(t taker) fieldTaker {
	if f, ok := t.(fieldTaker); ok {
		return f
	}
	return takerFields{t}
}

// takerFields is a taker that only returns a whole Decision, split.
type takerFields struct{ t taker }

func (a takerFields) TakeFields(identity string, alg Algorithm, now, n int64, p *Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error) {
	d, err := a.t.Take(identity, alg, now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, err
}
