package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Lease is one slot of a concurrency limit, held from Acquire until Release
// (or until the policy's LeaseTTL, if the holder crashes and never releases).
type Lease struct {
	l        *Limiter
	key      Key
	id       uint64
	degraded bool
	done     atomic.Bool
}

// ID is the lease's random identifier.
func (ls *Lease) ID() uint64 { return ls.id }

// Acquire takes one slot of the concurrency limit for identity. Admitted: a
// Lease to Release when the work is done, and the Decision. Denied: a nil
// Lease and a Decision whose RetryAfter is when the oldest lease's TTL runs
// out (a release may free a slot sooner). Errors as for AllowN. When the
// failure policy admits (fail open), the Lease is degraded and its Release
// does nothing; with FailFallback, the fallback limiter's lease is returned.
func (l *Limiter) Acquire(ctx context.Context, identity string) (*Lease, Decision, error) {
	if l.leaser == nil {
		return nil, Decision{}, fmt.Errorf("%w: %s does not hold leases; use Allow", ErrUnsupported, l.alg.Name())
	}
	if err := l.check(identity, 1); err != nil {
		return nil, Decision{}, err
	}
	var start time.Time
	if l.cfg.Observer != nil {
		start = time.Now()
	}
	key := Key{Namespace: l.ns, Identity: identity}
	id := newLeaseID()
	d, storeErr := l.do(ctx, key, OpTake, 1, id)
	err := storeErr
	var lease *Lease
	switch {
	case err == nil && d.Allowed:
		lease = &Lease{l: l, key: key, id: id}
	case err != nil:
		lease, d, err = l.failAcquire(ctx, identity, err)
	}
	if l.cfg.Observer != nil {
		l.cfg.Observer(Event{Policy: l.p.Name, Op: "acquire", Decision: d, Err: eventErr(err, storeErr, d), Duration: time.Since(start)})
	}
	return lease, d, err
}

func (l *Limiter) failAcquire(ctx context.Context, identity string, err error) (*Lease, Decision, error) {
	err, gone := storeFailure(ctx, "acquire", err)
	if gone {
		return nil, Decision{}, err
	}
	switch l.cfg.Failure {
	case FailOpen:
		return &Lease{l: l, degraded: true}, Decision{Allowed: true, Limit: l.quota, Degraded: true}, nil
	case FailFallback:
		lease, d, ferr := l.cfg.Fallback.Acquire(ctx, identity)
		if ferr != nil {
			return nil, Decision{}, errors.Join(err, ferr)
		}
		d.Degraded = true
		return lease, d, nil
	}
	return nil, Decision{}, err
}

// Release frees the lease's slot. It runs even when ctx is already
// cancelled (a request whose client went away must still give its slot
// back), under the limiter's own deadline (DefaultTimeout when the limiter
// has none). A second Release returns
// ErrLeaseReleased. If Release fails, the slot is reclaimed after LeaseTTL.
func (ls *Lease) Release(ctx context.Context) error {
	if ls == nil {
		return nil
	}
	if !ls.done.CompareAndSwap(false, true) {
		return ErrLeaseReleased
	}
	if ls.degraded {
		return nil
	}
	l := ls.l
	ctx = context.WithoutCancel(ctx)
	if !l.local && l.cfg.Timeout <= 0 {
		// A limiter with no deadline of its own still gives a release one:
		// the caller's deadline is gone with its cancellation, and a
		// release must not hang on a store that does not answer.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	_, err := l.do(ctx, ls.key, OpRelease, 1, ls.id)
	if l.cfg.Observer != nil {
		l.cfg.Observer(Event{Policy: l.p.Name, Op: "release", Err: err})
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		err = &StoreError{Op: "release", Err: err}
	}
	return err
}
