package memory

import "github.com/sluicehq/sluice/core"

var (
	// ErrFull is returned by Update for a new key when its shard holds its
	// share of Options.MaxKeys live keys. It matches core.ErrUnavailable, so
	// the Limiter's failure policy decides the request; no live key is ever
	// evicted to make room.
	ErrFull error = &storeError{"memory: store is full (Options.MaxKeys live keys); the new key is refused"}
	// ErrClosed is returned by every call after Close. It matches
	// core.ErrUnavailable.
	ErrClosed error = &storeError{"memory: store is closed"}
)

// storeError is a static error, so that refusing a request allocates nothing
// even under a flood.
type storeError struct{ msg string }

func (e *storeError) Error() string { return e.msg }

// Is makes errors.Is(err, core.ErrUnavailable) true: the store could not
// decide, and the failure policy takes over.
func (e *storeError) Is(target error) bool { return target == core.ErrUnavailable }
