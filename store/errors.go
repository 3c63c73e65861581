package store

import (
	"errors"
	"fmt"
)

var (
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
)

// Error wraps an error from a store: the store could not decide.
type Error struct {
	Op  string // "update", "script", "release", ...
	Err error
}

func (e *Error) Error() string { return "sluice: store " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the store's own error.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *Error) Is(target error) bool { return target == ErrUnavailable }

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
