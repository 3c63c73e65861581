package store

import (
	"context"
	"reflect"
	"time"
)

// Store is the one thing a backend must give: an atomic read-modify-write of
// one key. How it is made atomic is the store's business: a lock, a
// compare-and-swap loop (see CASUpdate), or one server-side script.
//
// Update calls m.Apply with the key's current state (empty when the key is
// absent or expired: nil, or a zero-length slice whose capacity Apply may
// write into) and writes what Apply returns, with its TTL, as one
// atomic step: no other Update of the same key may fall between the read
// that Apply saw and the write. A store that retries (CAS) calls Apply again
// on each attempt; the result of the call whose write succeeded is the one
// that counts. When Apply returns a nil next, nothing is written.
//
// Update returns an error only when it could not decide: the network, a
// deadline, exhausted retries. Errors should match ErrUnavailable (wrap them
// in *Error); an error after which the write may have happened should
// also match ErrOutcomeUnknown (see UnknownOutcome).
type Store interface {
	Update(ctx context.Context, key Key, m Mutation) error
}

// Mutation is one decision to be applied to one key's state.
type Mutation interface {
	// Apply computes the next state from state (empty when absent) and the
	// TTL after which an idle key may vanish. A nil next means "unchanged,
	// write nothing". Apply is pure and may write next into state's backing
	// array, so a store must pass a state it owns and not read it afterwards.
	Apply(state []byte) (next []byte, ttl time.Duration)
}

// Deleter is implemented by stores that can delete a key (Limiter.Reset).
type Deleter interface {
	Delete(ctx context.Context, key Key) error
}

// ClockSkewer is implemented by a store whose decisions are made on the
// clocks of the Limiters that use it (a compare-and-swap store, the memory
// store, the generic path of a script store). ClockSkew is the largest
// disagreement between those clocks that the store allows for (its TTL
// allowance; zero for one clock). A Limiter that decides on its own clock
// over such a store clamps every state it reads (Clamper): a stored time
// more than ClockSkew ahead of what a step at its now could write is read,
// and written back, as that bound, so one instance whose clock runs far
// ahead cannot hold the keys it touched in the future. Scripts get no clamp:
// they read the server's clock, one for the whole fleet, unless the Limiter
// has a Clock of its own (a test's).
type ClockSkewer interface {
	ClockSkew() time.Duration
}

// IsNil reports whether s is nil, or an interface holding a nil pointer
// (a store variable of a concrete type that was never built): a
// constructor that takes a Store rejects both, where the second would
// otherwise pass a nil check and panic at the first call. It takes any
// value, so that the constructors check an Algorithm the same way.
func IsNil(s any) bool {
	if s == nil {
		return true
	}
	v := reflect.ValueOf(s)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// MaxClockSkew is the largest clock skew a store declares: 30 days, the
// longest window (core.MaxWindow). The network stores take a larger
// Options.ClockSkew as this: every TTL is lengthened by the skew, and a
// skew near the largest time.Duration would overflow it, leaving keys with
// no time to live and the limit unenforced.
const MaxClockSkew = 30 * 24 * time.Hour

// Closer is implemented by stores that hold background work or connections.
type Closer interface {
	Close() error
}
