package core

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidPolicy matches every *PolicyError.
	ErrInvalidPolicy = errors.New("sluice: invalid policy")
	// ErrInvalidInput matches every error a Limiter returns for bad
	// arguments: an empty key, a cost n <= 0, a cost above the policy's
	// capacity. Nothing is written to the store for such a call.
	ErrInvalidInput = errors.New("sluice: invalid input")
	// ErrUnavailable matches every error that means the store could not
	// decide: a network error, a deadline, exhausted CAS retries, an outcome
	// that is unknown. The Limiter's failure policy handles these; with
	// FailClosed they reach the caller.
	ErrUnavailable = errors.New("sluice: store unavailable")
	// ErrContention matches *ContentionError: a CAS loop gave up.
	ErrContention = errors.New("sluice: too much contention on one key")
	// ErrOutcomeUnknown matches a store error after which the update may or
	// may not have been applied (a reply lost after the request was sent).
	// Such a call is never retried: retrying could count a request twice.
	//
	// A store classes each failure by what is known of it, and only the
	// third class matches: not sent (no connection could be had: a refused
	// or failed dial, a closed client, a deadline met before the request
	// was written), rejected before writing (the server refused the request,
	// or refused a script's first write, so nothing changed), or sent with
	// its reply lost (a timeout, a broken connection once the request went
	// out, an error raised after a script may have written). All three
	// match ErrUnavailable. An Acquire whose outcome is unknown releases its
	// lease id in the background (see Limiter.Acquire).
	ErrOutcomeUnknown = errors.New("sluice: outcome unknown")
	// ErrUnsupported is returned for an operation the algorithm or store
	// does not offer (for example Acquire on a rate algorithm).
	ErrUnsupported = errors.New("sluice: unsupported")
	// ErrLeaseReleased is returned by a second Release of one lease.
	ErrLeaseReleased = errors.New("sluice: lease already released")
)

// PolicyError names the field of a Policy that is not valid and why.
type PolicyError struct {
	Policy string // the policy's Name (may itself be the invalid field)
	Field  string
	Reason string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("sluice: policy %q: %s %s", e.Policy, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidPolicy) true.
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// InputError is a bad argument to a Limiter call.
type InputError struct {
	Arg    string // "key", "n"
	Reason string
}

func (e *InputError) Error() string { return "sluice: " + e.Arg + " " + e.Reason }

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// StoreError wraps an error from a store: the store could not decide.
type StoreError struct {
	Op  string // "update", "script", "release", ...
	Err error
}

func (e *StoreError) Error() string { return "sluice: store " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the store's own error.
func (e *StoreError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *StoreError) Is(target error) bool { return target == ErrUnavailable }

// ContentionError is returned by the CAS loop when every attempt lost a race.
type ContentionError struct {
	Attempts int
}

func (e *ContentionError) Error() string {
	return fmt.Sprintf("sluice: gave up after %d compare-and-swap conflicts on one key", e.Attempts)
}

// Is makes errors.Is(err, ErrContention) and errors.Is(err, ErrUnavailable)
// true.
func (e *ContentionError) Is(target error) bool {
	return target == ErrContention || target == ErrUnavailable
}

// UnknownOutcome wraps err so that it matches ErrOutcomeUnknown (and
// ErrUnavailable). Stores use it for a reply lost after the request went out.
func UnknownOutcome(err error) error { return &unknownOutcome{err} }

type unknownOutcome struct{ err error }

func (e *unknownOutcome) Error() string { return "outcome unknown: " + e.err.Error() }
func (e *unknownOutcome) Unwrap() error { return e.err }
func (e *unknownOutcome) Is(target error) bool {
	return target == ErrOutcomeUnknown || target == ErrUnavailable
}

// ErrEvictable matches every *EvictionWarning: a server behind a store may
// evict limiter keys (or the store could not tell whether it may), so limits
// can silently reset.
var ErrEvictable = errors.New("sluice: the store may evict limiter keys")

// EvictionWarning says that a server behind a store may evict live limiter
// keys, as Redis and Valkey do under any maxmemory-policy but noeviction
// (volatile-* too: every limiter key has a TTL), or that the store could not
// read the policy (Policy "unknown", Err says why). An evicted key reads as
// absent, so each eviction of a live key can admit up to one more quota for
// its identity. It is a warning: the store goes on deciding.
type EvictionWarning struct {
	Addr   string // the server, when known
	Policy string // its eviction policy, or "unknown"
	Err    error  // why the policy is unknown; nil when it was read
}

func (w *EvictionWarning) Error() string {
	where := "sluice: "
	if w.Addr != "" {
		where += w.Addr + ": "
	}
	if w.Err != nil {
		return where + "eviction policy unknown (" + w.Err.Error() + "): limiter keys may be evicted, each eviction admitting up to one more quota"
	}
	return where + "maxmemory-policy " + w.Policy + " may evict limiter keys, each eviction admitting up to one more quota"
}

// Is makes errors.Is(err, ErrEvictable) true.
func (w *EvictionWarning) Is(target error) bool { return target == ErrEvictable }

// Unwrap returns why the policy is unknown, or nil.
func (w *EvictionWarning) Unwrap() error { return w.Err }
