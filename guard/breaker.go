package guard

import (
	"context"
	"errors"
	"math"
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
	// to its use again: at most Cooldown plus one call.
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
	// the goroutine whose call caused it (an open breaker turns half-open
	// when a call or State finds its Cooldown over). It runs under the
	// breaker's lock: it must be fast and must not call the breaker (State
	// included); hand the change to a channel or an atomic to act on it.
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
}

// NewBreaker returns a breaker around s. The store it hands out (Store)
// implements exactly the optional interfaces s implements among
// store.ScriptRunner, store.MultiScriptRunner, store.Deleter, store.Closer
// and store.ClockSkewer, so a Limiter or a core.Multi over it takes the same
// paths as over s (the same keys, and the same refunds). It never claims
// inproc.InProcess or inproc.Binder: a store without I/O needs no breaker.
// Scripts and Delete go through the breaker; Close and ClockSkew do not
// (they are not calls to the server that may fail for a time).
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
		IsExcluded: func(err error) bool { return err == errExcluded },
	}
	if f := o.OnStateChange; f != nil {
		st.OnStateChange = func(name string, from, to gobreaker.State) { f(name, state(from), state(to)) }
	}
	if o.Timeout == 0 {
		o.Timeout = core.DefaultTimeout
	}
	b := &Breaker{cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](st), inner: s, given: o.Timeout}
	b.store = wrap(b, s)
	return b
}

// Store returns the store to give a Limiter: s behind the breaker.
func (b *Breaker) Store() store.Store { return b.store }

// State returns the breaker's state now.
func (b *Breaker) State() State { return state(b.cb.State()) }

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
	case ctx.Err() == nil:
		return errFailure
	case errors.Is(ctx.Err(), context.Canceled):
		return errExcluded // the caller left
	}
	if dl, ok := ctx.Deadline(); ok && b.given > 0 && dl.Sub(start) < b.given-time.Millisecond {
		return errExcluded // the caller's own deadline, shorter than Timeout
	}
	return errFailure
}
