package core

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// A pre-filter (Config.PreFilter) is a loose limit kept in process, in
// front of the store: a request it refuses costs no round trip, and one it
// admits goes on to the store, which stays the source of truth. It counts
// every request this instance sends to the store, admitted there or not
// (less what a Receipt refunded: Charge charges it with a receipt of its
// own), so it catches floods, not the limit. guard.PreFilter builds one sized to
// the fleet and says how to size it. A cost above the pre-filter's quota
// (its Decision.Limit) skips it and goes to the store.

// guarded decides AllowN with the deny cache and the pre-filter in front
// of the store.
func (l *Limiter) guarded(ctx context.Context, identity string, n int64, start time.Time) (Decision, error) {
	sc, d, err := l.screen(ctx, identity, n, start, false)
	if sc.done {
		return d, err
	}
	d, err = l.do(ctx, store.Key{Namespace: l.ns, Identity: identity}, store.OpTake, n, 0)
	l.hold(identity, n, sc, d, err)
	return l.settle(ctx, identity, n, d, err, start)
}

// screened is what the deny cache and the pre-filter said before a store
// call: done when one of them refused, and otherwise what hold needs.
type screened struct {
	done bool
	now  int64    // the clock, read before the store call (the deny cache's)
	mark uint64   // the deny cache's count of refunds and Resets then
	pre  *Receipt // the pre-filter's charge, when charge and it can refund
}

// screen asks the deny cache, then the pre-filter. When one of them
// refuses, it returns done and the decision AllowN (or Charge) returns.
// With charge, the pre-filter is charged with a receipt (Charge's), so
// that a refund of the store's charge gives its units back there too: the
// pre-filter then never holds units a refund gave back to the store, so
// it refuses no more than the store would (see guard.PreFilter).
func (l *Limiter) screen(ctx context.Context, identity string, n int64, start time.Time, charge bool) (screened, Decision, error) {
	var sc screened
	if l.deny != nil {
		sc.now = l.now()
		var d Decision
		var ok bool
		if d, ok, sc.mark = l.deny.get(identity, n, sc.now); ok {
			d, err := l.settleFrom(ctx, identity, n, d, nil, start, fromDenyCache)
			return screened{done: true}, d, err
		}
	}
	if pf := l.cfg.PreFilter; pf != nil {
		var d Decision
		var err error
		if charge {
			d, sc.pre, err = pf.Charge(ctx, identity, n)
		} else {
			d, err = pf.AllowN(ctx, identity, n)
		}
		// A cost above the pre-filter's quota is the store's to decide.
		if err == nil && !d.Allowed && n <= d.Limit {
			d = Decision{Limit: l.quota, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
			d, err = l.settleFrom(ctx, identity, n, d, nil, start, fromPreFilter)
			return screened{done: true}, d, err
		}
	}
	return sc, Decision{}, nil
}

// hold keeps the store's refusal d of identity in the deny cache.
func (l *Limiter) hold(identity string, n int64, sc screened, d Decision, err error) {
	if l.deny != nil && err == nil && !d.Allowed && !d.Degraded {
		// Unless a refund or a Reset overtook it: it may describe units
		// since given back.
		l.deny.put(identity, n, sc.now, d, sc.mark)
	}
}
