package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Limit is one of several limits decided together on one identity: a
// Policy (its Name names the limit, in store keys and in the RateLimit
// fields) and the Algorithm that enforces it. Different limits of one set
// may use different algorithms.
type Limit struct {
	Policy    Policy
	Algorithm Algorithm
}

// MaxLimits is the most limits one Limits may hold.
const MaxLimits = 16

// Limits is a checked, immutable set of limits on one identity, decided
// together by a Multi: a request is admitted only if every limit admits
// it, and then every limit is charged; a refusal charges none. Build it
// with NewLimits; share it freely (it is safe for concurrent use). A
// Limits is an argument of each decision, not part of the Multi, so the
// limits applied can differ per request (a tenant's tier, see Tiers) and
// change at runtime without a restart.
type Limits struct {
	ls     []limit
	script *store.Script // the shared multi-limit script, when every algorithm has one
	quota  int64         // the smallest quota: the largest cost that could ever be admitted
	keys   atomic.Pointer[limitKeys]
}

type limit struct {
	p     Policy
	alg   Algorithm
	quota int64
	ms    MultiScripted
}

// limitKeys caches the namespaces of one Limits under one Multi (the last
// Multi that used it), so a decision builds no key string but the hashed one.
type limitKeys struct {
	multi string
	ns    []string
}

// MultiScripted is implemented by algorithms whose Lua twin can run as one
// limit of a multi-limit script: package algorithm's six rate algorithms
// and its Calendar. Every algorithm of one package returns the same Script,
// which steps each limit on its own key (KEYS[i]) without writing, and
// writes every limit's new state only when all admit. The script's ARGV
// are now (µs; 0 reads the server's TIME), the number of limits k, then
// for each limit the values AppendMultiArgs appends. Its reply is six
// integers per limit (store.ScriptResult's convention), then the time it
// decided at (µs).
type MultiScripted interface {
	MultiScript() *store.Script
	// AppendMultiArgs appends one limit's arguments for a cost of n. hint
	// is the Limiter's own clock (µs), for algorithms whose arguments
	// depend on the date (calendar periods); the script still decides at
	// the server's time.
	AppendMultiArgs(dst []int64, p *Policy, hint, n int64) []int64
}

// NewLimits checks each limit (Policy.Validate, the algorithm's
// PolicyChecker) and returns the set. Names must be distinct. A limit
// that holds leases (the concurrency algorithm) cannot be one of several:
// it is released, not charged. Errors match ErrInvalidPolicy.
func NewLimits(limits ...Limit) (*Limits, error) {
	if len(limits) == 0 || len(limits) > MaxLimits {
		return nil, fmt.Errorf("%w: a set needs 1 to %d limits, got %d", ErrInvalidPolicy, MaxLimits, len(limits))
	}
	s := &Limits{ls: make([]limit, len(limits))}
	scripted := true
	for i, lm := range limits {
		if store.IsNil(lm.Algorithm) {
			return nil, fmt.Errorf("%w: limit %d (%q) has no Algorithm", ErrInvalidPolicy, i, lm.Policy.Name)
		}
		if err := lm.Policy.Validate(); err != nil {
			return nil, err
		}
		if c, ok := lm.Algorithm.(PolicyChecker); ok {
			if err := c.CheckPolicy(&lm.Policy); err != nil {
				return nil, err
			}
		}
		if _, ok := lm.Algorithm.(Leaser); ok {
			return nil, fmt.Errorf("%w: limit %q: %s holds leases and cannot be one of several limits", ErrInvalidPolicy, lm.Policy.Name, lm.Algorithm.Name())
		}
		for j := range i {
			if limits[j].Policy.Name == lm.Policy.Name {
				return nil, fmt.Errorf("%w: two limits are named %q", ErrInvalidPolicy, lm.Policy.Name)
			}
		}
		l := limit{p: lm.Policy, alg: lm.Algorithm}
		l.quota = l.alg.Quota(&l.p)
		l.ms, _ = lm.Algorithm.(MultiScripted)
		if l.ms == nil || (s.script != nil && l.ms.MultiScript() != s.script) {
			scripted = false
		} else if s.script == nil {
			s.script = l.ms.MultiScript()
		}
		if i == 0 || l.quota < s.quota {
			s.quota = l.quota
		}
		s.ls[i] = l
	}
	if !scripted {
		s.script = nil
	}
	return s, nil
}

// MustLimits is NewLimits for limits known to be valid; it panics on error.
func MustLimits(limits ...Limit) *Limits {
	s, err := NewLimits(limits...)
	if err != nil {
		panic(err)
	}
	return s
}

// Len is the number of limits.
func (s *Limits) Len() int { return len(s.ls) }

// Limit returns the i-th limit.
func (s *Limits) Limit(i int) Limit { return Limit{Policy: s.ls[i].p, Algorithm: s.ls[i].alg} }

// Quota is the largest cost that every limit could admit at once: the
// smallest of their quotas.
func (s *Limits) Quota() int64 { return s.quota }

// LimitState is one limit's part of a multi-limit decision.
type LimitState struct {
	// Name is the limit's Policy.Name.
	Name string
	// Decision is this limit's own answer. Allowed reports whether this
	// limit alone would admit the request; when the request as a whole was
	// refused, nothing was charged, and Remaining and ResetAfter are what
	// this limit has as it stands (ResetAfter is exact for every algorithm
	// but the sliding log and the sliding counter, whose reset is reported
	// as if charged, which errs late: by up to a window for the sliding
	// counter, when only this request would have counted in the current
	// window). RetryAfter is zero for a limit that would admit.
	Decision
	// Window is the limit's Policy.Window (for the RateLimit-Policy field).
	Window time.Duration
}

// MultiConfig configures a Multi. Name and Store are required.
type MultiConfig struct {
	// Name names the decision's keys: each limit is kept under
	// "<prefix>:<name>:<limit name>:{<identity hash>}" on a script store,
	// and all limits of an identity in one item under
	// "<prefix>:<name>:{<identity hash>}" on any other. Policy-name rules.
	// The item's key is the one a Limiter of the same Prefix keeps for a
	// policy of that name, and a limit's key the one a Limiter with Prefix
	// "<prefix>:<name>" keeps for a policy named as the limit: give a Multi
	// a name no Limiter's policy has under its Prefix (nor use its prefix
	// and name as a Limiter's Prefix), or each reads the other's state as
	// absent and admits its whole quota again.
	Name string
	// Store holds the state. When it is a store.MultiScriptRunner and every
	// limit's algorithm is MultiScripted, a decision is one script over the
	// identity's keys (one slot of a Redis Cluster: they share its hash
	// tag); otherwise it is one Store.Update of one item holding every
	// limit's state (one lock in memory, one compare-and-swap on memcached).
	Store store.Store
	// Prefix, Clock, Timeout and NoScript are as in Config.
	Prefix   string
	Clock    Clock
	Timeout  time.Duration
	NoScript bool
	// Failure is FailClosed (the default) or FailOpen; a Multi has no
	// fallback limiter.
	Failure FailureMode
	// Observer, when set, hears every decision (Event.Policy is Name, the
	// Decision the most constraining limit's).
	Observer func(Event)
}

// Multi decides several limits on one identity at once. It is safe for
// concurrent use; one Multi serves every tenant and every set of limits.
//
// Atomicity: on Redis and Valkey a decision is one script (EVALSHA) over
// one key per limit, all in the identity's slot; the script steps every
// limit without writing, and writes only if all admit. On every other
// store it is one Store.Update of one item that holds all the limits'
// states. Either way no other decision on the identity falls between the
// check and the charge, and a refused request charges nothing.
//
// The two paths keep different keys: every instance that shares a Multi's
// Name must use the same store path (as Config.NoScript says).
type Multi struct {
	cfg    MultiConfig
	ns     string
	runner store.MultiScriptRunner
	skew   int64 // µs; -1 when the store declares none (no clamp)
	local  bool
	dl     *Limiter  // holds the shared deadline of each granule (deadline.go)
	resets resetGate // as Limiter's
}

// NewMulti validates cfg and returns a Multi.
func NewMulti(cfg MultiConfig) (*Multi, error) {
	if store.IsNil(cfg.Store) {
		return nil, errors.New("sluice: MultiConfig.Store is nil")
	}
	if cfg.Clock != nil && store.IsNil(cfg.Clock) {
		return nil, fmt.Errorf("sluice: MultiConfig.Clock is nil (a nil %T): leave Clock unset for the system clock", cfg.Clock)
	}
	name := Policy{Name: cfg.Name}
	if len(name.Name) == 0 || len(name.Name) > MaxNameLen {
		return nil, &PolicyError{Policy: cfg.Name, Field: "Name", Reason: fmt.Sprintf("must be 1 to %d characters, got %d", MaxNameLen, len(cfg.Name))}
	}
	for i := 0; i < len(cfg.Name); i++ {
		if !nameByte(cfg.Name[i]) {
			return nil, &PolicyError{Policy: cfg.Name, Field: "Name", Reason: fmt.Sprintf("must use only A-Z a-z 0-9 . _ - (byte %d is %q)", i, cfg.Name[i:i+1])}
		}
	}
	switch cfg.Failure {
	case FailClosed, FailOpen:
	default:
		return nil, fmt.Errorf("sluice: MultiConfig.Failure must be FailClosed or FailOpen, got %s", cfg.Failure)
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
	m := &Multi{cfg: cfg, ns: store.Namespace(cfg.Prefix, cfg.Name), skew: -1}
	if r, ok := cfg.Store.(store.MultiScriptRunner); ok && !cfg.NoScript {
		m.runner = r
	}
	if sk, ok := cfg.Store.(store.ClockSkewer); ok {
		m.skew = int64(max(sk.ClockSkew(), 0) / time.Microsecond)
	}
	_, m.local = cfg.Store.(interface{ InProcess() })
	m.dl = &Limiter{cfg: Config{Timeout: cfg.Timeout}, local: m.local}
	return m, nil
}

// Name is the Multi's name.
func (m *Multi) Name() string { return m.cfg.Name }

// Allow is shorthand for AllowN(ctx, identity, limits, 1, states).
func (m *Multi) Allow(ctx context.Context, identity string, limits *Limits, states []LimitState) (Decision, []LimitState, error) {
	return m.AllowN(ctx, identity, limits, 1, states)
}

// AllowN decides whether n units are admitted now for identity under every
// limit of limits. It admits only when every limit admits, and then
// charges n to each; a refusal charges none. The Decision is the most
// constraining limit's: for a refusal, the refusing limit with the longest
// RetryAfter (so RetryAfter is the honest wait: the longest over what
// refused); for an admission, the limit with the fewest units Remaining,
// and Delay the longest of any limit's. states is filled with one
// LimitState per limit, in the order of limits, reusing its capacity (pass
// a buffer to decide without allocating for it).
//
// Errors: ErrInvalidInput for an empty identity, a nil limits or n outside
// 1..limits.Quota() (nothing is written); ErrUnavailable when the store
// could not decide and Failure is FailClosed; ctx.Err() when ctx ends
// first (on a store that waits: an in-process store, which never does,
// decides whatever ctx, as Limiter.AllowN does).
func (m *Multi) AllowN(ctx context.Context, identity string, limits *Limits, n int64, states []LimitState) (Decision, []LimitState, error) {
	d, states, _, err := m.allow(ctx, identity, limits, n, states)
	return d, states, err
}

// allow is AllowN, and the time the decision was made at (µs, the store's
// clock: the server's on the script path), for a refund of its charge.
func (m *Multi) allow(ctx context.Context, identity string, limits *Limits, n int64, states []LimitState) (Decision, []LimitState, int64, error) {
	states = states[:0]
	var at int64
	if err := m.checkInput(identity, limits, n); err != nil {
		return Decision{}, states, 0, err
	}
	start := timer(m.cfg.Observer != nil, m.local)
	states, err := m.decide(ctx, identity, limits, n, states, &at)
	var d Decision
	storeErr := err
	if err != nil {
		var gone bool
		err, gone = storeFailure(ctx, "update", err)
		if !gone && m.cfg.Failure == FailOpen {
			// Nothing is known but the quotas: the most constraining
			// limit is the one of the smallest.
			states = states[:0]
			d = Decision{Allowed: true, Degraded: true, Limit: limits.ls[0].quota}
			for i := range limits.ls {
				l := &limits.ls[i]
				states = append(states, LimitState{Name: l.p.Name, Window: l.p.Window, Decision: Decision{Allowed: true, Degraded: true, Limit: l.quota}})
				d.Limit = min(d.Limit, l.quota)
			}
			err = nil
		}
		if err != nil {
			m.observe(d, nil, err, start)
			return Decision{}, states[:0], 0, err
		}
		at = 0 // fail open charged nothing
	} else {
		d = constraining(states)
	}
	m.observe(d, states, eventErr(err, storeErr, d), start)
	return d, states, at, err
}

// Reset deletes identity's state under every limit of limits, so that its
// next request meets fresh quotas. It deletes the keys of both paths (one
// per limit on a script store, the one item on any other), so it resets
// whichever path wrote them. It returns ErrUnsupported when the store
// cannot delete, and an *InputError (ErrInvalidInput) for an empty
// identity or nil limits; a failed delete is the store's error, after the
// other keys were tried. It voids this Multi's earlier receipts, as
// Limiter.Reset does.
func (m *Multi) Reset(ctx context.Context, identity string, limits *Limits) error {
	if err := m.checkInput(identity, limits, 1); err != nil { // a unit is within every quota
		return err
	}
	d, err := deleterOf(m.cfg.Store)
	if err != nil {
		return err
	}
	ctx, cancel := m.deadline(ctx)
	defer cancel()
	if err := m.resets.begin(ctx); err != nil { // as Limiter.Reset
		m.resets.end()
		return err
	}
	defer m.resets.end()
	err = d.Delete(ctx, store.Key{Namespace: m.ns, Identity: identity})
	for _, ns := range m.namespaces(limits) {
		if e := d.Delete(ctx, store.Key{Namespace: ns, Identity: identity}); err == nil {
			err = e
		}
	}
	return err
}

// ObserveFailure tells the Observer of a decision that failed before the
// Multi was asked, so that it is counted with the decisions returned as
// errors: the limits of a Tiers whose resolver failed (Tiers.Resolve's
// error, on which the HTTP doors answer 503). The Observer hears an Event
// of Op "allow" with err and a zero Decision, as for a store that failed
// with FailClosed. A nil err, or a Multi without an Observer, does
// nothing.
func (m *Multi) ObserveFailure(err error) {
	if err == nil || m == nil || m.cfg.Observer == nil {
		return
	}
	m.cfg.Observer(Event{Policy: m.cfg.Name, Op: "allow", Err: err})
}

func (m *Multi) observe(d Decision, states []LimitState, err error, start time.Time) {
	if m.cfg.Observer == nil {
		return
	}
	m.cfg.Observer(Event{Policy: m.cfg.Name, Op: "allow", Decision: d, Err: err, Duration: took(start), Limits: states})
}

func (m *Multi) checkInput(identity string, limits *Limits, n int64) error {
	switch {
	case m.dl == nil:
		return errors.New("sluice: the Multi was not made by NewMulti")
	case identity == "":
		return &InputError{Arg: "key", Reason: "is empty"}
	case limits == nil:
		return &InputError{Arg: "limits", Reason: "is nil"}
	case len(limits.ls) == 0:
		return &InputError{Arg: "limits", Reason: "holds no limit (build it with NewLimits)"}
	case n < 1:
		return costBelowOne(n)
	case n > limits.quota:
		for i := range limits.ls {
			if l := &limits.ls[i]; n > l.quota {
				return &InputError{Arg: "n", Reason: fmt.Sprintf("%d exceeds the quota %d of limit %q: it could never be admitted", n, l.quota, l.p.Name)}
			}
		}
	}
	return nil
}

// constraining picks the Decision a caller sees from every limit's.
func constraining(states []LimitState) Decision {
	allowed := true
	for i := range states {
		allowed = allowed && states[i].Allowed
	}
	best := -1
	var delay time.Duration
	for i := range states {
		s := &states[i].Decision
		delay = max(delay, s.Delay)
		switch {
		case !allowed:
			if !s.Allowed && (best < 0 || s.RetryAfter > states[best].RetryAfter) {
				best = i
			}
		case best < 0 || s.Remaining < states[best].Remaining ||
			s.Remaining == states[best].Remaining && s.ResetAfter > states[best].ResetAfter:
			best = i
		}
	}
	d := states[best].Decision
	d.Allowed = allowed
	if allowed {
		d.Delay = delay
	}
	return d
}

func (m *Multi) now() int64 {
	if m.cfg.Clock != nil {
		return m.cfg.Clock.Now().UnixMicro()
	}
	return wallMicros()
}

// deadline is the Limiter's: a context.WithTimeout of a cancellable
// caller's context, the shared deadline of the granule otherwise.
func (m *Multi) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return m.dl.deadline(ctx)
}

// decide runs one decision on the store and appends each limit's state.
func (m *Multi) decide(ctx context.Context, identity string, limits *Limits, n int64, states []LimitState, at *int64) ([]LimitState, error) {
	ctx, cancel := m.deadline(ctx)
	defer cancel()
	if m.runner != nil && limits.script != nil {
		return m.script(ctx, identity, limits, n, states, at)
	}
	mu := multiPool.Get().(*multiMutation)
	mu.m, mu.ls, mu.n, mu.states = m, limits, n, states[:0]
	mu.now = m.now()
	mu.applied = false
	err := m.cfg.Store.Update(ctx, store.Key{Namespace: m.ns, Identity: identity}, mu)
	states = mu.states
	applied := mu.applied
	*at = mu.now
	mu.m, mu.ls, mu.states = nil, nil, nil
	multiPool.Put(mu)
	if err == nil && !applied {
		err = &store.Error{Op: "update", Err: errors.New("sluice: the store returned without applying the decision")}
	}
	return states, err
}

// namespaces returns each limit's namespace under m.
func (m *Multi) namespaces(limits *Limits) []string {
	if k := limits.keys.Load(); k != nil && k.multi == m.ns {
		return k.ns
	}
	k := &limitKeys{multi: m.ns, ns: make([]string, len(limits.ls))}
	for i := range limits.ls {
		k.ns[i] = m.ns + ":" + limits.ls[i].p.Name
	}
	limits.keys.Store(k)
	return k.ns
}

type scriptBufs struct {
	keys  []store.Key
	args  []int64
	reply []int64
}

var scriptPool = sync.Pool{New: func() any { return new(scriptBufs) }}

func (m *Multi) script(ctx context.Context, identity string, limits *Limits, n int64, states []LimitState, at *int64) ([]LimitState, error) {
	b := scriptPool.Get().(*scriptBufs)
	defer scriptPool.Put(b)
	ns := m.namespaces(limits)
	b.keys = b.keys[:0]
	hint := m.now()
	var now int64
	if m.cfg.Clock != nil {
		now = scriptNow(hint)
	}
	b.args = append(b.args[:0], now, int64(len(limits.ls)))
	for i := range limits.ls {
		l := &limits.ls[i]
		b.keys = append(b.keys, store.Key{Namespace: ns[i], Identity: identity})
		b.args = l.ms.AppendMultiArgs(b.args, &l.p, hint, n)
	}
	reply, err := m.runner.RunMultiScript(ctx, limits.script, b.keys, b.args, b.reply[:0])
	b.reply = reply[:0]
	for i := range b.keys {
		b.keys[i] = store.Key{} // the pool must not keep identities alive
	}
	if err != nil {
		return states, err
	}
	if len(reply) != 6*len(limits.ls)+1 {
		return states, &store.Error{Op: "script", Err: store.UnknownOutcome(fmt.Errorf("sluice: a multi-limit script replied %d integers for %d limits", len(reply), len(limits.ls)))}
	}
	*at = reply[6*len(limits.ls)]
	allowed := true
	for i := range limits.ls {
		l := &limits.ls[i]
		var r store.ScriptResult
		copy(r[:], reply[6*i:])
		allowed = allowed && r[0] == 1
		states = append(states, LimitState{Name: l.p.Name, Window: l.p.Window, Decision: ScriptDecision(r)})
	}
	if !allowed {
		uncharge(states, limits, n)
	}
	return states, nil
}

// uncharge turns the states of a refused decision into what each limit
// still has: the limits that would have admitted were not charged. A limit
// with its quota whole resets in no time (Decision.ResetAfter).
func uncharge(states []LimitState, ls *Limits, n int64) {
	for i := range states {
		d := &states[i].Decision
		if !d.Allowed {
			continue
		}
		if u, ok := ls.ls[i].alg.(Uncharger); ok {
			d.ResetAfter = u.Uncharged(*d, n, &ls.ls[i].p)
		}
		d.Remaining = min(d.Remaining+n, d.Limit)
		if d.Remaining == d.Limit {
			d.ResetAfter = 0
		}
		d.Delay = 0
	}
}

var multiPool = sync.Pool{New: func() any { return new(multiMutation) }}

// multiMutation is one multi-limit decision over one item that holds every
// limit's state (multistate.go).
type multiMutation struct {
	m       *Multi
	ls      *Limits
	now, n  int64
	states  []LimitState
	applied bool
	segs    []segment
	scratch []byte
	out     []byte
}

// Now is the time of the decision (see internal/inproc.Timed).
func (mu *multiMutation) Now() int64 { return mu.now }

// Retime reads the clock again, before each attempt of store.CASUpdate.
func (mu *multiMutation) Retime() {
	if mu.m != nil {
		mu.now = mu.m.now()
	}
}

func (mu *multiMutation) Apply(state []byte) ([]byte, time.Duration) {
	mu.applied = true
	mu.states = mu.states[:0]
	mu.segs = decodeSegments(state, mu.segs[:0])
	// Each limit steps a copy of its segment: a step may write into the
	// state it is given, and the item's bytes must survive a refusal.
	type stepped struct {
		off, n int // the next state in mu.scratch, or n = -1 for unchanged
	}
	var nexts [MaxLimits]stepped
	mu.scratch = mu.scratch[:0]
	allowed := true
	var ttl time.Duration
	for i := range mu.ls.ls {
		l := &mu.ls.ls[i]
		old := findSegment(mu.segs, l.p.Name)
		in := append([]byte(nil), old...)
		alg := l.alg
		var cttl time.Duration
		clamped := false
		if c, ok := alg.(Clamper); ok && mu.m.skew >= 0 {
			in, cttl, clamped = c.Clamp(in, mu.now, mu.m.skew, &l.p)
		}
		next, t, d := alg.Step(in, mu.now, mu.n, &l.p)
		if next == nil && clamped {
			next, t = in, cttl
		}
		allowed = allowed && d.Allowed
		mu.states = append(mu.states, LimitState{Name: l.p.Name, Window: l.p.Window, Decision: d})
		if next == nil {
			nexts[i] = stepped{n: -1}
		} else {
			nexts[i] = stepped{off: len(mu.scratch), n: len(next)}
			mu.scratch = append(mu.scratch, next...)
		}
		ttl = max(ttl, t)
	}
	if !allowed {
		uncharge(mu.states, mu.ls, mu.n)
		return nil, 0
	}
	mu.out = mu.out[:0]
	for i := range mu.ls.ls {
		l := &mu.ls.ls[i]
		seg := findSegment(mu.segs, l.p.Name)
		if s := nexts[i]; s.n >= 0 {
			seg = mu.scratch[s.off : s.off+s.n]
		}
		mu.out = appendSegment(mu.out, l.p.Name, seg)
	}
	mu.out = appendOthers(mu.out, mu.segs, mu.ls)
	if ttl <= 0 {
		ttl = time.Microsecond
	}
	return append([]byte(nil), mu.out...), ttl
}
