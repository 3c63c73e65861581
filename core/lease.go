package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Lease is one slot of a concurrency limit, held from Acquire until Release
// (or until the policy's LeaseTTL, if the holder crashes and never releases).
//
// A slot taken by an Acquire whose outcome is unknown (its error matches
// ErrOutcomeUnknown: the store may have run it, but the reply was lost) is
// given back by the Limiter itself, in the background; see Acquire for the
// bound.
type Lease struct {
	l        *Limiter
	key      store.Key
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
// In shadow mode (Config.Shadow) a refusal is admitted with a Lease that
// holds no slot, whose Release does nothing.
//
// When the store's error matches ErrOutcomeUnknown, the store may hold a
// slot under the lease id that nobody was given. Whatever the failure policy
// (and also when the caller's context ended), Acquire then releases that id
// in the background, as Release would (releasing an id the store does not
// hold changes nothing): 5 attempts, each under a fresh deadline of
// Config.Timeout (DefaultTimeout when the limiter has none), the first one
// deadline after Acquire returned (by then a store has sent the Acquire, if
// it ever will, so the release does not overtake it), the next after a
// jittered backoff of half to all of 1, 2, 4, 8 × that deadline, stopping
// at the first that releases the slot (one that finds no such lease goes
// on: the Acquire may still be on its way on a connection that a network
// delivers after the release's, and the store then takes it after the
// release); the last attempt's deadline is the end of the
// window, 21 × that deadline (2.1 s at the default 100 ms) after Acquire
// returned, and it is tried again every half to whole deadline while the
// store refuses it at once (a server down refuses the dial), the last time
// once the window has ended; the goroutine ends by itself a deadline after
// the window's end at the latest. So once the store answers again
// within that window, the slot is free by the next attempt (at most the
// backoff then running; from the last attempt on, at once, or within a
// deadline for a store that had refused it): the last attempt is still
// waiting for it, even on a client that writes nothing until a new
// connection's handshake is answered. Only a store unreachable for the
// whole window leaves the slot to LeaseTTL, and so does one whose every
// answer, a fresh connection's handshake included, takes longer than the
// deadline: the last attempt may begin a deadline before the window's
// end. The Observer hears one "release" event for it, with the last
// attempt's error, and the time of that attempt's store call.
func (l *Limiter) Acquire(ctx context.Context, identity string) (*Lease, Decision, error) {
	if l.leaser == nil {
		if !l.made() {
			return nil, Decision{}, errLimiterNotMade
		}
		return nil, Decision{}, fmt.Errorf("%w: %s does not hold leases; use Allow", ErrUnsupported, l.alg.Name())
	}
	if err := l.check(identity, 1); err != nil {
		return nil, Decision{}, err
	}
	start := l.timer()
	key := store.Key{Namespace: l.ns, Identity: identity}
	id := newLeaseID()
	d, storeErr := l.do(ctx, key, store.OpTake, 1, id)
	if storeErr != nil && errors.Is(storeErr, ErrOutcomeUnknown) {
		l.releaseOrphan(key, id)
	}
	err := storeErr
	var lease *Lease
	switch {
	case err == nil && d.Allowed:
		lease = &Lease{l: l, key: key, id: id}
	case err != nil:
		lease, d, err = l.failAcquire(ctx, identity, err)
	}
	shadowed := false
	if err == nil && !d.Allowed && l.cfg.Shadow {
		// A lease that holds no slot: its Release touches nothing (shadow.go).
		lease, d, shadowed = &Lease{l: l, degraded: true}, shadowAdmission(d), true
	}
	if l.cfg.Observer != nil {
		l.cfg.Observer(Event{Policy: l.p.Name, Op: "acquire", Decision: d, Err: eventErr(err, storeErr, d), Duration: took(start), Shadowed: shadowed})
	}
	return lease, d, err
}

func (l *Limiter) failAcquire(ctx context.Context, identity string, err error) (*Lease, Decision, error) {
	err, gone := storeFailure(ctx, "acquire", err)
	if gone {
		return nil, Decision{}, err
	}
	if l.cfg.Failure == FailFallback {
		lease, d, ferr := l.cfg.Fallback.Acquire(ctx, identity)
		if ferr == nil {
			d.Degraded = true
			return lease, d, nil
		}
		err = errors.Join(err, ferr)
	}
	if l.failsOpen() {
		return &Lease{l: l, degraded: true}, Decision{Allowed: true, Limit: l.quota, Degraded: true}, nil
	}
	return nil, Decision{}, err
}

// Release frees the lease's slot. It runs even when ctx is already
// cancelled (a request whose client went away must still give its slot
// back), under the limiter's own deadline (DefaultTimeout when the limiter
// has none). A second Release returns
// ErrLeaseReleased. If Release fails on a network store, it returns the
// failure and the limiter tries again in the background, as it releases
// the lease of an Acquire whose outcome is unknown (see Acquire for the
// attempts and their window; the Observer hears a second "release" event
// at their end): a brief stall does not hold the slot until LeaseTTL. A
// store that stays unreachable for the whole window leaves it to LeaseTTL.
func (ls *Lease) Release(ctx context.Context) error {
	if ls == nil {
		return nil
	}
	if ls.l == nil {
		return errors.New("sluice: the Lease was not returned by Acquire")
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
	start := l.timer()
	_, err := l.do(ctx, ls.key, store.OpRelease, 1, ls.id)
	if l.cfg.Observer != nil {
		l.cfg.Observer(Event{Policy: l.p.Name, Op: "release", Err: err, Duration: took(start)})
	}
	if err != nil && !l.local {
		// It may have landed or not: a release is idempotent, and the
		// background one goes on until an attempt releases the slot or
		// the window ends.
		l.releaseOrphan(ls.key, ls.id)
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		err = &store.Error{Op: "release", Err: err}
	}
	return err
}

// The bounds of the background release of a lease whose Acquire had an
// unknown outcome (see Limiter.Acquire).
const (
	// orphanAttempts is the most release attempts for one such lease.
	orphanAttempts = 5
	// orphanWindow bounds, in attempt deadlines, how long the wait before
	// the first attempt, the attempts and their backoffs last: 1 + 5 + at
	// most 1+2+4+8.
	orphanWindow = 1 + orphanAttempts + 1 + 2 + 4 + 8
)

// lastOrphanRelease is the background release's last attempt: it waits out
// the window (until end), so that a store that answers again within it
// takes this release, even one that writes nothing until a new
// connection's handshake is answered; and, when the store refuses it at
// once (a server down refuses the dial), tries again every half to whole
// deadline, the last time once end has come, each try under a deadline of
// at least one deadline but none past a deadline after end. It returns how
// long the last try's store call took, and its error.
func (l *Limiter) lastOrphanRelease(key store.Key, id uint64, wait time.Duration, end time.Time) (time.Duration, error) {
	for {
		began := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), orphanDeadline(began, end, wait))
		_, err := l.call(ctx, key, store.OpRelease, 1, id)
		cancel()
		// Done once a try that began at the window's end failed too: one
		// that began before may have spent its time on its client's own
		// retries (go-redis dials again after a refusal) while the store
		// came back.
		if err == nil || !began.Before(end) {
			return time.Since(began), err
		}
		if left := time.Until(end); left > 0 {
			time.Sleep(min(wait/2+rand.N(wait/2+1), left))
		}
	}
}

// orphanDeadline is the deadline of a last-attempt try begun at began: a
// deadline after began, or the window's end if later, but never past a
// deadline after the window's end, the goroutine's bound.
func orphanDeadline(began, end time.Time, wait time.Duration) time.Time {
	dl := began.Add(wait)
	if end.After(dl) {
		dl = end
	}
	if last := end.Add(wait); dl.After(last) {
		dl = last
	}
	return dl
}

// orphansRunning counts the background releases still running (for tests).
var orphansRunning atomic.Int64

// releaseOrphan releases lease id of key in the background, within the
// bounds above. Release is idempotent, so an attempt whose own outcome is
// unknown is simply tried again.
func (l *Limiter) releaseOrphan(key store.Key, id uint64) {
	wait := l.cfg.Timeout
	if wait <= 0 {
		wait = DefaultTimeout
	}
	orphansRunning.Add(1)
	go func() {
		defer orphansRunning.Add(-1)
		end := time.Now().Add(orphanWindow * wait)
		var err error
		var dur time.Duration // of the last store call: the event's Duration
		for attempt := range orphanAttempts {
			if attempt == 0 {
				// A store may still send the Acquire until its deadline's
				// worth after Acquire gave up (a batch that took it waits
				// for the latest deadline among its calls); a release
				// answered before that could leave its slot taken.
				time.Sleep(wait)
			} else {
				// Half to all of 1, 2, 4, 8 deadlines: jittered, so that the
				// releases of one stall do not return together.
				b := wait << (attempt - 1)
				time.Sleep(b/2 + rand.N(b/2+1))
			}
			if attempt == orphanAttempts-1 {
				dur, err = l.lastOrphanRelease(key, id, wait, end)
				break
			}
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			var d Decision
			d, err = l.call(ctx, key, store.OpRelease, 1, id)
			cancel()
			dur = time.Since(began)
			if err == nil && d.Allowed {
				break // released
			}
			// Failed, or found no such lease: the Acquire may still be on
			// its way, on a connection whose bytes a network delivers
			// after those of the release's (a fresh one): the next
			// attempt takes it.
		}
		if l.cfg.Observer != nil {
			if err != nil && !errors.Is(err, ErrUnavailable) {
				err = &store.Error{Op: "release", Err: err}
			}
			l.cfg.Observer(Event{Policy: l.p.Name, Op: "release", Err: err, Duration: dur})
		}
	}()
}
