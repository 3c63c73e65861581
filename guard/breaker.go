package guard

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Defaults for the fields of BreakerOptions.
const (
	// DefaultConsecutiveFailures opens the breaker after this many failures
	// in a row.
	DefaultConsecutiveFailures = 5
	// DefaultFailureRatio opens the breaker when at least this share of the
	// calls in the window failed (and at least DefaultMinCalls were made).
	DefaultFailureRatio = 0.5
	// DefaultMinCalls is the fewest calls in the window before the ratio
	// counts.
	DefaultMinCalls = 20
	// DefaultWindow is the rolling window the ratio is counted over, in ten
	// buckets.
	DefaultWindow = 10 * time.Second
	// DefaultCooldown is how long the breaker stays open before it lets
	// probes through (half-open). It bounds the time from a store's recovery
	// to its use again: at most Cooldown plus one call, once the store's
	// client reaches it (see the package doc for go-redis).
	DefaultCooldown = 250 * time.Millisecond
	// DefaultProbes is how many calls the half-open breaker lets through at
	// once; that many successes in a row close it, one failure opens it.
	DefaultProbes = 3
)

// ErrOpen matches the error of a call the breaker refused without sending
// it: the breaker is open, or half-open with all its probes in flight. The
// error also matches core.ErrUnavailable (so the Limiter's failure policy
// decides), and never core.ErrOutcomeUnknown: nothing was sent.
var ErrOpen = errors.New("sluice: circuit breaker open")

// errRefused is what a refused call returns: a *store.Error over ErrOpen.
var errRefused error = &store.Error{Op: "breaker", Err: ErrOpen}

// State is a breaker's state.
type State int

// The states of a breaker.
const (
	// Closed: every call goes to the store, and failures are counted.
	Closed State = iota
	// HalfOpen: up to Probes calls at once go to the store; the others are
	// refused with ErrOpen.
	HalfOpen
	// Open: every call is refused with ErrOpen, until Cooldown has passed.
	Open
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "unknown"
}

// BreakerOptions configures a Breaker. A nil *BreakerOptions means all
// defaults. Values outside what the breaker can count are taken as the
// nearest it can: counts up to 2^32 − 1, FailureRatio up to 1 (NaN is the
// default), Window from 10 ms and Window and Cooldown up to 24 h.
type BreakerOptions struct {
	// Name names the breaker in OnStateChange. Default "store".
	Name string
	// ConsecutiveFailures opens the breaker after that many failures in a
	// row. Zero means DefaultConsecutiveFailures (5); negative disables
	// this trigger.
	ConsecutiveFailures int
	// FailureRatio opens the breaker when that share (0 to 1) of the calls
	// in Window failed, once MinCalls were made in it. Zero means
	// DefaultFailureRatio (0.5); negative disables this trigger.
	FailureRatio float64
	// MinCalls is the fewest calls in Window before FailureRatio counts.
	// Zero means DefaultMinCalls (20).
	MinCalls int
	// Window is the rolling window of FailureRatio, counted in ten buckets.
	// Zero means DefaultWindow (10 s).
	Window time.Duration
	// Cooldown is how long the breaker stays open before it probes. Zero
	// means DefaultCooldown (250 ms).
	Cooldown time.Duration
	// Probes is how many calls the half-open breaker lets through at once,
	// and how many successes in a row close it. Zero means DefaultProbes
	// (3).
	Probes int
	// OnStateChange, when set, is called on every change of state, from
	// the goroutine whose call caused it, except the change from open to
	// half-open: the breaker's own timer makes it when Cooldown ends, with
	// no call needed (or a call or State that finds Cooldown over first
	// does), so that a service that stopped calling after an outage does
	// not report its breaker open for ever. The timer calls nothing but
	// OnStateChange: the store is called only by the calls through the
	// breaker, and a half-open breaker probes with the next ones. It runs
	// under the breaker's lock: it must be fast and must not call the
	// breaker (State and Stop included); hand the change to a channel or
	// an atomic to act on it.
	OnStateChange func(name string, from, to State)
	// Timeout is the Config.Timeout of the Limiters over the breaker. A
	// call that its context's deadline ended is counted as a failure only
	// when that deadline gave it at least Timeout (less 1 ms): a shorter
	// one was the caller's own, and the store is not to blame. Zero means
	// core.DefaultTimeout; negative means every deadline counts.
	Timeout time.Duration
}

// Bounds of the options, which NewBreaker clamps to: a count past
// MaxUint32 wrapped in gobreaker's counters (a breaker asked to open
// after 2^32 failures opened after the first), a window of a few
// nanoseconds had buckets of none (it never opened), one near the largest
// Duration overflowed them (it panicked), and a ratio above 1 or NaN never
// tripped.
const (
	minWindow   = 10 * time.Millisecond
	maxDuration = 24 * time.Hour
)

// clamp brings o's set values into the ranges the breaker can count in.
func (o *BreakerOptions) clamp() {
	o.ConsecutiveFailures = min(o.ConsecutiveFailures, math.MaxUint32)
	o.MinCalls = min(o.MinCalls, math.MaxUint32)
	o.Probes = min(o.Probes, 1<<20)
	switch {
	case math.IsNaN(o.FailureRatio):
		o.FailureRatio = DefaultFailureRatio
	case o.FailureRatio > 1:
		o.FailureRatio = 1
	}
	o.Window = min(max(o.Window, minWindow), maxDuration)
	o.Cooldown = min(o.Cooldown, maxDuration)
}

// Breaker is a circuit breaker around one store (sony/gobreaker). Store
// returns the store to give a Limiter. It is safe for concurrent use.
//
// While it is open, a timer turns it half-open when Cooldown ends (see
// BreakerOptions.OnStateChange); Stop ends that timer, and closing the
// breaker's store stops it too. A breaker that is dropped unstopped holds
// no goroutine: its timer, if the breaker is open, fires once within
// Cooldown and is gone.
//
// What counts: a call that fails with an error matching core.ErrUnavailable
// is a failure (a refused or broken connection, a deadline, an outcome
// unknown), except when the caller's own context ended it (the caller left,
// or its own deadline, shorter than BreakerOptions.Timeout, passed: the
// store is not to blame) and except core.ErrContention (a CAS loop that
// lost races to a store that answers). Every other result is a success:
// the store answered.
type Breaker struct {
	cb    *gobreaker.TwoStepCircuitBreaker[struct{}]
	inner store.Store
	store store.Store
	given time.Duration // BreakerOptions.Timeout: a shorter deadline is the caller's

	cooldown time.Duration
	onChange func(name string, from, to State) // BreakerOptions.OnStateChange

	// The timer that turns an open breaker half-open. mu is taken under
	// gobreaker's lock (by changed), never the other way round.
	mu      sync.Mutex
	timer   *time.Timer    // armed while open, unless stopped
	due     time.Time      // when the last opening's Cooldown ends
	stopped bool           // Stop was called: the timer is never armed again
	wakes   sync.WaitGroup // the timer's callbacks under way
}

// NewBreaker returns a breaker around s. The store it hands out (Store)
// implements exactly the optional interfaces s implements among
// store.ScriptRunner, store.MultiScriptRunner, store.Deleter, store.Closer
// and store.ClockSkewer, so a Limiter or a core.Multi over it takes the same
// paths as over s (the same keys, and the same refunds). It never claims
// inproc.InProcess or inproc.Binder: a store without I/O needs no breaker.
// Scripts and Delete go through the breaker; Close and ClockSkew do not
// (they are not calls to the server that may fail for a time), and Close
// stops the breaker's timer (Stop) before it closes s.
func NewBreaker(s store.Store, opts *BreakerOptions) *Breaker {
	var o BreakerOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "store"
	}
	if o.ConsecutiveFailures == 0 {
		o.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if o.FailureRatio == 0 {
		o.FailureRatio = DefaultFailureRatio
	}
	if o.MinCalls <= 0 {
		o.MinCalls = DefaultMinCalls
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.Probes <= 0 {
		o.Probes = DefaultProbes
	}
	o.clamp()
	b := &Breaker{inner: s, cooldown: o.Cooldown, onChange: o.OnStateChange}
	st := gobreaker.Settings{
		Name:         o.Name,
		MaxRequests:  uint32(min(o.Probes, 1<<20)),
		Interval:     o.Window,
		BucketPeriod: o.Window / 10,
		Timeout:      o.Cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if o.ConsecutiveFailures > 0 && c.ConsecutiveFailures >= uint32(o.ConsecutiveFailures) {
				return true
			}
			return o.FailureRatio > 0 && c.Requests >= uint32(o.MinCalls) &&
				float64(c.TotalFailures) >= o.FailureRatio*float64(c.Requests)
		},
		IsExcluded:    func(err error) bool { return err == errExcluded },
		OnStateChange: b.changed,
	}
	if o.Timeout == 0 {
		o.Timeout = core.DefaultTimeout
	}
	b.given = o.Timeout
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	if !store.IsNil(s) {
		b.store = wrap(b, s)
	}
	return b
}

// changed hears every change of state, under gobreaker's lock: it arms the
// timer when the breaker opens, disarms it when the breaker leaves open,
// and passes the change on to OnStateChange.
func (b *Breaker) changed(name string, from, to gobreaker.State) {
	b.mu.Lock()
	switch {
	case b.stopped:
	case to == gobreaker.StateOpen:
		b.due = time.Now().Add(b.cooldown)
		if b.timer == nil {
			b.timer = time.AfterFunc(b.cooldown, b.wake)
		} else {
			b.timer.Reset(b.cooldown)
		}
	case from == gobreaker.StateOpen:
		b.timer.Stop()
	}
	b.mu.Unlock()
	if b.onChange != nil {
		b.onChange(name, state(from), state(to))
	}
}

// wake runs when an opening's Cooldown ends: reading the state turns the
// breaker half-open (gobreaker's own check, which calls changed), without
// a call to the store.
func (b *Breaker) wake() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.wakes.Add(1)
	b.mu.Unlock()
	defer b.wakes.Done()
	if b.cb.State() != gobreaker.StateOpen {
		return
	}
	// Still open: the timer ran a hair ahead of gobreaker's clock, or a
	// call opened the breaker again meanwhile (and re-armed the timer).
	// Wake again when the last opening's Cooldown ends.
	b.mu.Lock()
	if !b.stopped {
		b.timer.Reset(max(time.Until(b.due), time.Millisecond))
	}
	b.mu.Unlock()
}

// Stop ends the timer that turns an open breaker half-open; when it
// returns, the timer reports nothing more. The breaker works on: an open
// breaker then turns half-open only when a call or State finds its
// Cooldown over, as OnStateChange reports. Closing the breaker's store
// (store.Closer) stops it too. Stop may be called more than once, but not
// from OnStateChange.
func (b *Breaker) Stop() {
	b.mu.Lock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.wakes.Wait()
}

// Store returns the store to give a Limiter: s behind the breaker. It is
// nil when s was (core.New and core.NewMulti refuse it, as they refuse s).
func (b *Breaker) Store() store.Store { return b.store }

// State returns the breaker's state now: Closed for a Breaker that
// NewBreaker did not make.
func (b *Breaker) State() State {
	if b.cb == nil {
		return Closed
	}
	return state(b.cb.State())
}

func state(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// The outcomes a call reports to gobreaker.
var (
	errFailure  = errors.New("failure")
	errExcluded = errors.New("excluded")
)

// outcome classes a store call's result (see Breaker).
func (b *Breaker) outcome(ctx context.Context, err error, start time.Time) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, core.ErrContention), !errors.Is(err, core.ErrUnavailable):
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		return errExcluded // the caller left
	}
	dl, ok := ctx.Deadline()
	if ctx.Err() == nil && (!ok || time.Now().Before(dl)) {
		return errFailure
	}
	// The deadline passed: the context says so, or a socket set to it
	// timed out at the same instant, before the context's timer fired.
	if b.given > 0 && dl.Sub(start) < b.given-time.Millisecond {
		return errExcluded // the caller's own deadline, shorter than Timeout
	}
	return errFailure
}
