package core

import (
	"errors"

	"github.com/sluicehq/sluice/internal/abbrev"
	"github.com/sluicehq/sluice/store"
)

var (
	// ErrInvalidPolicy matches every *PolicyError.
	ErrInvalidPolicy = errors.New("sluice: invalid policy")
	// ErrInvalidInput matches every error a Limiter returns for bad
	// arguments: an empty key, a cost n <= 0, a cost above the policy's
	// capacity. Nothing is written to the store for such a call.
	ErrInvalidInput = errors.New("sluice: invalid input")
	// ErrUnsupported is returned for an operation the algorithm or store
	// does not offer (for example Acquire on a rate algorithm).
	ErrUnsupported = errors.New("sluice: unsupported")
	// ErrLeaseReleased is returned by a second Release of one lease.
	ErrLeaseReleased = errors.New("sluice: lease already released")
	// ErrUnavailable is [store.ErrUnavailable], so that errors.Is finds it from either
	// package.
	ErrUnavailable = store.ErrUnavailable
	// ErrContention is [store.ErrContention], so that errors.Is finds it from either
	// package.
	ErrContention = store.ErrContention
	// ErrOutcomeUnknown is [store.ErrOutcomeUnknown], so that errors.Is finds it from either
	// package.
	ErrOutcomeUnknown = store.ErrOutcomeUnknown
)

// PolicyError names the field of a Policy that is not valid and why.
type PolicyError struct {
	Policy string // the policy's Name (may itself be the invalid field)
	Field  string
	Reason string
}

func (e *PolicyError) Error() string {
	// A name far past the longest allowed is cut short in the message.
	return "sluice: policy " + abbrev.Quote(e.Policy, 2*MaxNameLen) + ": " + e.Field + " " + e.Reason
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
