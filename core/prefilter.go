package core

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// A pre-filter (Config.PreFilter) is a loose limit kept in process, in
// front of the store: a request it refuses costs no round trip, and one it
// admits goes on to the store, which stays the source of truth. It counts
// every request this instance sends to the store, admitted there or not,
// so it catches floods, not the limit. guard.PreFilter builds one sized to
// the fleet and says how to size it. A cost above the pre-filter's quota
// (its Decision.Limit) skips it and goes to the store.

// guarded decides AllowN with the deny cache and the pre-filter in front
// of the store.
func (l *Limiter) guarded(ctx context.Context, identity string, n int64, start time.Time) (Decision, error) {
	var now int64
	var mark uint64
	if l.deny != nil {
		now = l.now()
		var d Decision
		var ok bool
		if d, ok, mark = l.deny.get(identity, n, now); ok {
			return l.settleFrom(ctx, identity, n, d, nil, start, fromDenyCache)
		}
	}
	if pf := l.cfg.PreFilter; pf != nil {
		// A cost above the pre-filter's quota is the store's to decide.
		if d, err := pf.AllowN(ctx, identity, n); err == nil && !d.Allowed && n <= d.Limit {
			d = Decision{Limit: l.quota, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
			return l.settleFrom(ctx, identity, n, d, nil, start, fromPreFilter)
		}
	}
	d, err := l.do(ctx, store.Key{Namespace: l.ns, Identity: identity}, store.OpTake, n, 0)
	if l.deny != nil && err == nil && !d.Allowed && !d.Degraded {
		// Unless a refund or a Reset overtook it: it may describe units
		// since given back.
		l.deny.put(identity, n, now, d, mark)
	}
	return l.settle(ctx, identity, n, d, err, start)
}
