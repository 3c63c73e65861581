package memory

import "github.com/sluicehq/sluice/core"

var (
	// ErrClosed is returned by every call after Close. It matches
	// core.ErrUnavailable.
	ErrClosed error = &storeError{"memory: store is closed"}
)

// storeError is a static error, so that refusing a call allocates nothing.
type storeError struct{ msg string }

func (e *storeError) Error() string { return e.msg }

// Is makes errors.Is(err, core.ErrUnavailable) true: the store could not
// decide, and the failure policy takes over.
func (e *storeError) Is(target error) bool { return target == core.ErrUnavailable }
