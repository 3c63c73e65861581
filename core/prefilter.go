package core

import (
	"context"
	"github.com/sluicehq/sluice/store"
	"time"
)

// A pre-filter (Config.PreFilter) is a loose limit kept in process, in
// front of the store: a request it refuses costs no round trip, and one it
// admits goes on to the store, which stays the source of truth. It catches
// floods, not the limit: it counts every request this instance sends to the
// store, admitted there or not.
//
// Sizing. Give the pre-filter the global policy's algorithm and Window, and
// k × Limit / N as its Limit (and Burst), where N is the fleet size and k
// the headroom over an even share. It can refuse what the global limit
// would admit only when one identity's traffic on this instance exceeds k/N
// of the global limit in a window. So:
//
//   - k = N (the pre-filter holds the whole global policy) never refuses an
//     identity that sends at most Limit per Window to this instance: the
//     global limit would refuse the excess anyway, except that a request the
//     store refused still used a pre-filter unit, which a bucket algorithm
//     earns back at the global rate. Use k = 2N to leave room for that.
//   - k < N refuses sooner, and may refuse what the global limit would
//     admit when traffic is skewed: an identity whose requests all reach
//     one instance is held to k/N of its limit there.
//
// Its quota should be at least the global one: a cost the pre-filter can
// never admit skips it and goes to the store.

// guarded decides AllowN with the deny cache and the pre-filter in front
// of the store.
func (l *Limiter) guarded(ctx context.Context, identity string, n int64, start time.Time) (Decision, error) {
	var now int64
	if l.deny != nil {
		now = l.now()
		if d, ok := l.deny.get(identity, n, now); ok {
			return l.settle(ctx, identity, n, d, nil, start)
		}
	}
	if pf := l.cfg.PreFilter; pf != nil {
		if d, err := pf.AllowN(ctx, identity, n); err == nil && !d.Allowed {
			d = Decision{Limit: l.quota, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
			return l.settle(ctx, identity, n, d, nil, start)
		}
	}
	d, err := l.do(ctx, store.Key{Namespace: l.ns, Identity: identity}, store.OpTake, n, 0)
	if l.deny != nil && err == nil && !d.Allowed && !d.Degraded {
		l.deny.put(identity, n, now, d)
	}
	return l.settle(ctx, identity, n, d, err, start)
}
