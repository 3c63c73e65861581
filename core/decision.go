package core

import (
	"time"
)

// Decision is the answer to one check. It carries everything an HTTP adapter
// needs to write Retry-After and the IETF RateLimit fields, so no second
// store call is ever made. A denied request is a Decision with Allowed false,
// never an error.
//
// The two flags lie together so that the struct is six words, not seven:
// it is copied on every decision.
type Decision struct {
	// Allowed reports whether the request was admitted (possibly after
	// Delay).
	Allowed bool
	// Degraded reports that the store could not decide and the Limiter's
	// failure policy did: fail open admitted the request, or the fallback
	// limiter decided it.
	Degraded bool
	// Limit is the quota a client sees: the number of units that can be
	// admitted at once from a fresh state (Limit for the window algorithms
	// and the concurrency limit, Burst for the bucket algorithms).
	Limit int64
	// Remaining is how many more units could be admitted right now, after
	// this decision.
	Remaining int64
	// RetryAfter is, for a denied request, how long until the same request
	// (the same cost) can be admitted if nothing else happens. Zero when
	// Allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the quota is whole again (Remaining ==
	// Limit) if nothing else is admitted.
	ResetAfter time.Duration
	// Delay is, for the leaky bucket, how long an admitted request must wait
	// before it starts: its place in the queue. Zero otherwise.
	Delay time.Duration
}
