// Package ctxend lets a store return at its caller's cancellation when its
// client does not: go-redis and valkey-go's dedicated connections set a
// context's deadline on their socket, and see its cancellation only there.
//
// A context that can end only at its deadline (the Limiter's shared
// deadline of a caller that cannot cancel) is marked by DeadlineOnly, so
// that the stores do not pay a goroutine for a cancellation that cannot
// come.
package ctxend

import (
	"context"
	"errors"
)

type deadlineOnly struct{}

// DeadlineOnly returns ctx marked as one that ends at its deadline and not
// before: ctx must have no cancellation but its deadline's.
func DeadlineOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, deadlineOnly{}, true)
}

// Early reports whether ctx may end before its deadline: it can be
// cancelled, and is not marked DeadlineOnly.
func Early(ctx context.Context) bool {
	return ctx.Done() != nil && ctx.Value(deadlineOnly{}) == nil
}

// Run runs f on a goroutine of its own and returns its results, or, when
// ctx is cancelled first, returns at once with ended set and leaves f to
// run on, to its deadline at the latest. f must then touch nothing its
// caller owns, and its results are dropped: the caller reports an unknown
// outcome. At ctx's deadline Run waits for f, which sees the deadline
// itself and says what became of its command.
//
// It is for a ctx that may end early (Early): a caller checks that first
// and calls f itself otherwise, so that the common path builds no closure
// and starts no goroutine.
func Run[T any](ctx context.Context, f func() (T, error)) (v T, err error, ended bool) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err, false
	case <-ctx.Done():
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		r := <-done
		return r.v, r.err, false
	}
	select {
	case r := <-done: // it finished as ctx ended
		return r.v, r.err, false
	default:
		return v, nil, true
	}
}
