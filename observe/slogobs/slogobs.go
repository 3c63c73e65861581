// Package slogobs logs what an operator must know about Sluice's limiters
// with log/slog, once per change and not once per request: a store that
// starts failing, keeps failing (at most one line per policy per
// Options.Repeat, with the count of errors in between), and recovers (has
// decided for Options.Quiet without an error: a store that fails one
// request in two, as a cluster with a node down does, is failing, not
// recovering twice a second); a circuit breaker that changes state; a
// fallback entered or left; an eviction warning from a store. A refusal
// answered by the deny cache is not a change, and DenyCacheHit logs
// nothing. It uses the standard library alone.
//
//	logs := slogobs.New(slog.Default(), slogobs.Options{})
//	lim, err := core.New(core.Config{..., Observer: logs.Observe})
//	st := redis.New(client, &redis.Options{OnWarning: logs.Warning})
//
// To feed metrics too, call both from one Observer:
//
//	Observer: func(e core.Event) { metrics.Observe(e); logs.Observe(e) }
//
// The lines (message, level, attributes):
//
//	"sluice: store failing"      WARN  policy, op, err, degraded
//	"sluice: store still failing" WARN policy, op, err, errors (since the last line), for
//	"sluice: store recovered"    INFO  policy, errors (since the last line), for
//	"sluice: breaker state"      WARN (open) or INFO  breaker, state, from
//	"sluice: fallback entered"   WARN  policy
//	"sluice: fallback left"      INFO  policy, for
//	"sluice: eviction warning"   WARN  err, evictable (the error matches core.ErrEvictable)
//
// A failure that is not the store's, a decision that failed before any
// store was asked (a tier resolver's error, which Multi.ObserveFailure
// reports), is logged the same way as "sluice: decisions failing", "still
// failing" and "recovered": the first error of a failure names it.
//
// A caller whose context ended is not a store failure and is not logged,
// and a refusal by the deny cache or the pre-filter, which asks no store,
// is not a recovery.
// Memory is bounded: at most MaxNames policies, breakers and distinct
// warnings are tracked each. A policy whose store fails while MaxNames
// others are tracked and failing is logged with the rest beyond the
// bound, together under the policy Other: one line per change for all of
// them, never one per request, however many policies an outage fails at
// once. A tracked policy that has recovered makes room for another. Past
// the bound, the tracking of breakers and warnings starts over (a change
// may then be logged once more).
package slogobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// DefaultRepeat is Options.Repeat when it is zero.
const DefaultRepeat = time.Minute

// DefaultQuiet is Options.Quiet when it is zero.
const DefaultQuiet = 10 * time.Second

// MaxNames bounds the policies, breakers and warnings tracked, each.
const MaxNames = 1000

// Other is the policy named in the lines about the failing policies beyond
// MaxNames, logged together (the name the metrics observers give them).
const Other = "other"

// Options configures a Logger. The zero value means the defaults.
type Options struct {
	// Repeat is the least time between two lines about one policy's
	// failing store. Default DefaultRepeat.
	Repeat time.Duration
	// Quiet is how long a failing policy's store must go on deciding
	// without an error before "store recovered" is logged, at its next
	// decision. Default DefaultQuiet.
	Quiet time.Duration
	// Now reads the time. Default time.Now.
	Now func() time.Time
}

// Logger logs transitions. Its methods are safe for concurrent use; Observe
// is a core.Config.Observer, and costs one map read and one atomic load
// for a decision of a store that is not failing.
type Logger struct {
	log    *slog.Logger
	repeat time.Duration
	quiet  time.Duration
	now    func() time.Time

	policies sync.Map // policy name → *policy, at most MaxNames of them
	others   policy   // the failing policies beyond MaxNames, together
	trackMu  sync.Mutex
	npol     int          // entries in policies; guarded by trackMu
	failing  atomic.Int64 // entries in policies whose failing is set

	mu       sync.Mutex
	breakers map[string]string    // name → last state
	fallback map[string]time.Time // policy → since, while active
	warnings map[string]bool      // messages logged
}

type policy struct {
	failing atomic.Bool
	mu      sync.Mutex
	gone    bool      // evicted from Logger.policies; guarded by mu
	since   time.Time // first error of this failure
	last    time.Time // last line logged
	lastErr time.Time // last error of this failure
	count   int64     // errors since the last line
	what    string    // what fails: "store", or "decisions" (failing)
}

// failing names what err says is failing: the store (it matches
// core.ErrUnavailable), or the decisions, which failed before any store
// was asked (a tier resolver's error, from Multi.ObserveFailure).
func failing(err error) string {
	if errors.Is(err, core.ErrUnavailable) {
		return "store"
	}
	return "decisions"
}

// New returns a Logger that writes to l (slog.Default() when nil).
func New(l *slog.Logger, opts Options) *Logger {
	if l == nil {
		l = slog.Default()
	}
	if opts.Repeat <= 0 {
		opts.Repeat = DefaultRepeat
	}
	if opts.Quiet <= 0 {
		opts.Quiet = DefaultQuiet
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Logger{log: l, repeat: opts.Repeat, quiet: opts.Quiet, now: opts.Now,
		breakers: map[string]string{}, fallback: map[string]time.Time{}, warnings: map[string]bool{}}
}

// Observe logs store failures and recoveries from the Limiter's events.
func (l *Logger) Observe(e core.Event) {
	storeErr := e.Err != nil && !callerGone(e.Err)
	// A refusal the deny cache or the pre-filter made asked no store, so
	// it says nothing of the store's health.
	healthy := e.Err == nil && !e.DenyCached && !e.PreFiltered
	v, ok := l.policies.Load(e.Policy)
	if !ok {
		if !storeErr {
			// Nothing to recover from, unless the policy is one of the
			// others (a policy that never failed may be taken for one
			// of them: the others recover together, after Quiet).
			if healthy && l.others.failing.Load() {
				l.recovered(Other, &l.others)
			}
			return
		}
		l.failed(e, l.track(e.Policy))
		return
	}
	p := v.(*policy)
	if !storeErr {
		if healthy && p.failing.Load() {
			l.recovered(e.Policy, p)
		}
		return
	}
	l.failed(e, p)
}

// failed logs e's store error against p, as its first or at most one per
// Repeat.
func (l *Logger) failed(e core.Event, p *policy) {
	name := e.Policy
	now := l.now()
	p.mu.Lock()
	for tries := 0; p.gone; tries++ {
		// Evicted (it had recovered) between the lookup and the lock.
		p.mu.Unlock()
		if p = l.track(name); tries == 2 {
			p = &l.others
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p == &l.others {
		name = Other
	}
	p.lastErr = now
	if !p.failing.Load() {
		p.failing.Store(true)
		if p != &l.others {
			l.failing.Add(1)
		}
		p.since, p.last, p.count, p.what = now, now, 0, failing(e.Err)
		l.log.Warn("sluice: "+p.what+" failing", "policy", name, "op", e.Op, "err", e.Err, "degraded", e.Decision.Degraded)
		return
	}
	p.count++
	if now.Sub(p.last) >= l.repeat {
		l.log.Warn("sluice: "+p.what+" still failing", "policy", name, "op", e.Op, "err", e.Err, "errors", p.count, "for", now.Sub(p.since).Round(time.Millisecond))
		p.last, p.count = now, 0
	}
}

func (l *Logger) recovered(name string, p *policy) {
	now := l.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.failing.Load() {
		return // another goroutine logged it
	}
	if now.Sub(p.lastErr) < l.quiet {
		return // still failing now and then
	}
	p.failing.Store(false)
	if p != &l.others {
		l.failing.Add(-1)
	}
	l.log.Info("sluice: "+p.what+" recovered", "policy", name, "errors", p.count, "for", now.Sub(p.since).Round(time.Millisecond))
}

// track returns the state of name, a policy whose store failed: its own,
// added to the tracked ones, or, when MaxNames are tracked and none of them
// has recovered, the others'.
func (l *Logger) track(name string) *policy {
	l.trackMu.Lock()
	defer l.trackMu.Unlock()
	if v, ok := l.policies.Load(name); ok {
		return v.(*policy)
	}
	if l.npol >= MaxNames && (l.failing.Load() >= int64(l.npol) || !l.evict()) {
		return &l.others
	}
	p := new(policy)
	l.policies.Store(name, p)
	l.npol++
	return p
}

// evict drops one tracked policy that is not failing, and reports whether
// it found one. l.trackMu must be held.
func (l *Logger) evict() (found bool) {
	l.policies.Range(func(k, v any) bool {
		p := v.(*policy)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.failing.Load() {
			return true
		}
		p.gone, found = true, true
		l.policies.Delete(k)
		l.npol--
		return false
	})
	return found
}

// callerGone reports an error that says the caller left, not that the
// store failed.
func callerGone(err error) bool {
	return store.IsContextError(err) && !errors.Is(err, core.ErrUnavailable)
}

// BreakerStateChanged logs that the circuit breaker name entered state,
// once per change: a repeated state logs nothing. Opening logs at WARN,
// other states at INFO. Wire it to the breaker's OnStateChange callback.
func (l *Logger) BreakerStateChanged(name, state string) {
	l.mu.Lock()
	from, ok := l.breakers[name]
	if ok && from == state {
		l.mu.Unlock()
		return
	}
	if !ok && len(l.breakers) >= MaxNames {
		clear(l.breakers)
	}
	l.breakers[name] = state
	l.mu.Unlock()
	level := slog.LevelInfo
	if state == "open" {
		level = slog.LevelWarn
	}
	if !ok {
		from = "unknown"
	}
	l.log.Log(context.Background(), level, "sluice: breaker state", "breaker", name, "state", state, "from", from)
}

// DenyCacheHit logs nothing: a refusal the deny cache answered is one per
// request, not a change. It is here so that one callback can feed the
// Prometheus, OpenTelemetry and slog observers alike.
func (l *Logger) DenyCacheHit(policy string) {}

// SetFallbackActive logs that policy entered or left its fallback, once
// per change. Wire it where the fallback is entered and left.
func (l *Logger) SetFallbackActive(policy string, active bool) {
	l.mu.Lock()
	since, was := l.fallback[policy]
	switch {
	case active == was:
		l.mu.Unlock()
		return
	case active:
		if len(l.fallback) >= MaxNames {
			clear(l.fallback)
		}
		l.fallback[policy] = l.now()
	default:
		delete(l.fallback, policy)
	}
	l.mu.Unlock()
	if active {
		l.log.Warn("sluice: fallback entered", "policy", policy)
	} else {
		l.log.Info("sluice: fallback left", "policy", policy, "for", l.now().Sub(since).Round(time.Millisecond))
	}
}

// Warning logs a store's warning (a *core.EvictionWarning: the server may
// evict limiter keys) the first time its message is seen. It fits the
// OnWarning option of the Redis and Valkey stores, which repeat their
// warnings every minute.
func (l *Logger) Warning(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	l.mu.Lock()
	if l.warnings[msg] {
		l.mu.Unlock()
		return
	}
	if len(l.warnings) >= MaxNames {
		clear(l.warnings)
	}
	l.warnings[msg] = true
	l.mu.Unlock()
	l.log.Warn("sluice: eviction warning", "err", err, "evictable", errors.Is(err, core.ErrEvictable))
}
