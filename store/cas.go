package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// CASBackend is what a compare-and-swap store gives the shared retry loop.
type CASBackend interface {
	// Load reads key. It returns the state (nil when absent) and a token
	// that Swap uses to check that nothing changed since (nil when absent).
	Load(ctx context.Context, key string) (state []byte, token any, err error)
	// Swap writes next with ttl if key still holds what Load saw: for a nil
	// token, only if the key is still absent. It reports false, with no
	// error, when another writer got there first.
	Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (ok bool, err error)
}

// RetryPolicy bounds the CAS loop. The zero value means the defaults.
type RetryPolicy struct {
	// MaxAttempts is how many compare-and-swaps are tried before the loop
	// gives up with a *ContentionError. Default 64.
	MaxAttempts int
	// BaseBackoff is the first backoff ceiling; each conflict doubles it up
	// to MaxBackoff, and the wait is drawn uniformly below the ceiling (full
	// jitter), so contenders spread out instead of colliding again in step.
	// Default 100µs.
	BaseBackoff time.Duration
	// MaxBackoff caps the backoff ceiling. Default 5ms.
	MaxBackoff time.Duration
}

func (r RetryPolicy) withDefaults() RetryPolicy {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 64
	}
	if r.BaseBackoff <= 0 {
		r.BaseBackoff = 100 * time.Microsecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 5 * time.Millisecond
	}
	if r.MaxBackoff < r.BaseBackoff {
		r.MaxBackoff = r.BaseBackoff
	}
	return r
}

// CASUpdate makes one atomic read-modify-write of key out of Load and Swap:
// load, apply m, swap; on a conflict, wait a jittered backoff and start over.
// When m has a Retime method (every Mutation a Limiter passes has one), it
// is retimed before each Apply, so that the write that lands is decided at
// the time of its own attempt: a request that lost a race, or waited its
// turn, judged at the instant it arrived against a state that later
// requests had already moved on would be denied spuriously. It returns the
// number of attempts made. It stops early, with the context's error, when
// ctx is done; with a *ContentionError after MaxAttempts conflicts; and at
// once on any Load or Swap error (an error is never retried here: a Swap
// that failed mid-flight may have written).
func CASUpdate(ctx context.Context, b CASBackend, key string, m Mutation, r RetryPolicy) (attempts int, err error) {
	r = r.withDefaults()
	ceiling := r.BaseBackoff
	rt, _ := m.(interface{ Retime() })
	for attempts = 1; ; attempts++ {
		state, token, err := b.Load(ctx, key)
		if err != nil {
			return attempts, err
		}
		if rt != nil {
			rt.Retime()
		}
		next, ttl := m.Apply(state)
		if next == nil {
			return attempts, nil
		}
		ok, err := b.Swap(ctx, key, token, next, ttl)
		if err != nil {
			return attempts, err
		}
		if ok {
			return attempts, nil
		}
		if attempts >= r.MaxAttempts {
			return attempts, &ContentionError{Attempts: attempts}
		}
		if err := sleep(ctx, rand.N(ceiling)+1); err != nil {
			return attempts, err
		}
		if ceiling *= 2; ceiling > r.MaxBackoff {
			ceiling = r.MaxBackoff
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsContextError reports whether err is a context's cancellation or deadline.
func IsContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
