package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrReservationSettled is returned by a second Settle of one reservation,
// and by a Settle after its timeout (the reservation settled at its
// estimate).
var ErrReservationSettled = errors.New("sluice: reservation already settled")

// ErrNoReservation is Settle's error on a nil Reservation: Reserve refused
// or failed, and reserved nothing to settle.
var ErrNoReservation = errors.New("sluice: no reservation: Reserve reserved nothing")

// Reservation is an estimate charged before work whose cost is known only
// after it (bytes sent, tokens an LLM produced, rows scanned): Settle then
// charges the actual cost. A reservation never settled — the process
// crashed, the caller forgot — stays charged at its estimate: that is its
// settlement after Timeout, and nothing is lost. Safe for concurrent use;
// Settle takes effect once.
type Reservation struct {
	l        *Limiter
	identity string
	receipt  *Receipt // nil when the charge cannot be refunded
	estimate int64
	deadline time.Time
	settled  atomic.Bool
}

// Settlement is what Settle did.
type Settlement struct {
	// Refunded is the units of the estimate given back (actual < estimate).
	Refunded int64
	// Charged is the units of the shortfall charged (actual > estimate).
	Charged int64
	// Uncharged is the units of the shortfall the limit did not allow:
	// the caller's to handle (bill, log, slow the client down).
	Uncharged int64
	// Unknown is the units of the shortfall whose charge's outcome is
	// unknown (ErrOutcomeUnknown: the store may have charged them after
	// the deadline): neither Charged nor Uncharged.
	Unknown int64
}

// DefaultReserveTimeout is how long a reservation may be settled when
// Reserve is given no timeout.
const DefaultReserveTimeout = time.Minute

// Reserve charges estimate units for identity now, for work whose actual
// cost Settle will report. The Decision is the estimate's: a refusal
// reserves nothing and returns no Reservation. timeout (DefaultReserveTimeout
// when 0) is how long the reservation may be settled, on the machine's
// clock (not Config.Clock: it bounds how long the process holds the
// reservation, not a policy's time); after it, it stands at its estimate.
// Errors are AllowN's.
func (l *Limiter) Reserve(ctx context.Context, identity string, estimate int64, timeout time.Duration) (Decision, *Reservation, error) {
	if timeout < 0 {
		return Decision{}, nil, &InputError{Arg: "timeout", Reason: fmt.Sprintf("must not be negative, got %s", timeout)}
	}
	if timeout == 0 {
		timeout = DefaultReserveTimeout
	}
	d, rc, err := l.Charge(ctx, identity, estimate)
	if err != nil || !d.Allowed || d.Degraded {
		return d, nil, err
	}
	return d, &Reservation{l: l, identity: identity, receipt: rc, estimate: estimate, deadline: time.Now().Add(timeout)}, nil
}

// Estimate is the units reserved (0 for a nil Reservation).
func (r *Reservation) Estimate() int64 {
	if r == nil {
		return 0
	}
	return r.estimate
}

// Settle reports the actual cost. Below the estimate, the excess is
// refunded (as far as a refund can: Refunder; a window that has ended
// keeps its units). Above it, the shortfall is charged as far as the limit
// allows now, and what it does not allow is reported as Uncharged: the
// work is done, and refusing it after the fact would help nobody. The
// shortfall costs at most four store calls, whatever its size; a part the
// failure policy decided is Uncharged, a part whose store call's outcome
// is unknown (the store may have charged it) is Unknown, and in shadow
// mode a part the limit refused (returned as an admission) is counted as
// Charged. The charges
// are part of the reserved request, not decisions of their own: the
// Observer hears none of them, and neither the deny cache nor the
// pre-filter is asked. Settle works once, before the reservation's
// timeout; after that it returns ErrReservationSettled and changes
// nothing. A nil Reservation (Reserve refused or failed) returns
// ErrNoReservation. A negative actual is an error matching ErrInvalidInput
// that settles nothing: the reservation can still be settled.
func (r *Reservation) Settle(ctx context.Context, actual int64) (Settlement, error) {
	if r == nil {
		return Settlement{}, ErrNoReservation
	}
	if actual < 0 {
		return Settlement{}, &InputError{Arg: "actual", Reason: fmt.Sprintf("must not be negative, got %d", actual)}
	}
	if time.Now().After(r.deadline) || !r.settled.CompareAndSwap(false, true) {
		return Settlement{}, ErrReservationSettled
	}
	var s Settlement
	switch {
	case actual < r.estimate:
		if r.receipt == nil {
			return s, nil
		}
		k, err := r.receipt.Refund(ctx, r.estimate-actual)
		if errors.Is(err, ErrNotRefunded) {
			err = nil
		}
		s.Refunded = k
		return s, err
	case actual > r.estimate:
		short := actual - r.estimate
		// Charge what fits, in parts no larger than the quota, then what
		// is left of the decision's Remaining (a race may leave less). A
		// limit admits at most its quota at one instant, so two parts are
		// all that can fit: the loop makes at most four store calls,
		// whatever the shortfall. It stops at a part that leaves nothing,
		// and at one the failure policy decided (Degraded), which charged
		// nothing on the store.
		for part := 0; short > 0 && part < 2; part++ {
			k := min(short, r.l.Quota())
			d, unknown, err := r.l.take(ctx, r.identity, k)
			if unknown {
				s.Unknown += k
				short -= k
			}
			if err != nil {
				s.Uncharged += short
				return s, err
			}
			if d.Degraded {
				break
			}
			if !d.Allowed {
				if k = min(k, d.Remaining); k < 1 {
					break
				}
				if d, unknown, err = r.l.take(ctx, r.identity, k); unknown {
					s.Unknown += k
					short -= k
				}
				if err != nil {
					s.Uncharged += short
					return s, err
				}
				if !d.Allowed || d.Degraded {
					break
				}
			}
			s.Charged += k
			short -= k
			if d.Remaining == 0 {
				break
			}
		}
		s.Uncharged += short
	}
	return s, nil
}
