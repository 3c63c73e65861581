package redis

import (
	"context"
	"errors"
	"sync"
	"time"
	"weak"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
)

// evictionCheckEvery is how often a store reads its servers' eviction
// policy in the background (a variable for the tests).
var evictionCheckEvery = time.Minute

// reconnectCheckGap: a new connection of the store's own client brings the
// next check forward, unless one started this recently (a variable for the
// tests).
var reconnectCheckGap = 10 * time.Second

// evictionCheckTimeout bounds one background check.
const evictionCheckTimeout = 2 * time.Second

// Check reads the maxmemory-policy of every server behind the store (each
// master of a cluster, each shard of a ring) with CONFIG GET. It returns nil
// when no server may evict limiter keys (noeviction), and otherwise one
// *core.EvictionWarning (matching core.ErrEvictable) per server that may,
// joined: a policy other than noeviction (volatile-* included, since every
// limiter key has a TTL), or one that could not be read (CONFIG renamed or
// forbidden, an unreachable server), reported as Policy "unknown". Check
// changes nothing and never stops the store from deciding.
//
// When Options.OnWarning is set, the store runs the same check by itself,
// in the background, and hands it each warning found: once when the store
// is built, again when its own client opens a new connection (at most every
// 10 s), and every minute, never per decision, until Close.
func (s *Store) Check(ctx context.Context) error {
	if err := s.ready("check"); err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		warns []error
	)
	one := func(ctx context.Context, c goredis.Cmdable, addr string) {
		if w := evictionWarning(ctx, c, addr); w != nil {
			mu.Lock()
			warns = append(warns, w)
			mu.Unlock()
		}
	}
	var err error
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
			one(ctx, n, n.Options().Addr)
			return nil
		})
	case *goredis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *goredis.Client) error {
			one(ctx, n, n.Options().Addr)
			return nil
		})
	case *goredis.Client:
		addr := c.Options().Addr
		if isFailover(c.Options()) {
			addr = "" // the primary, wherever it is now
		}
		one(ctx, c, addr)
	default:
		one(ctx, c, "")
	}
	if err != nil {
		warns = append(warns, &core.EvictionWarning{Policy: "unknown", Err: err})
	}
	return errors.Join(warns...)
}

// evictionWarning reads one server's policy: nil when it cannot evict.
func evictionWarning(ctx context.Context, c goredis.Cmdable, addr string) *core.EvictionWarning {
	m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return &core.EvictionWarning{Addr: addr, Policy: "unknown", Err: err}
	}
	p, ok := m["maxmemory-policy"]
	switch {
	case !ok:
		return &core.EvictionWarning{Addr: addr, Policy: "unknown", Err: errors.New("CONFIG GET maxmemory-policy returned no value")}
	case p == "noeviction":
		return nil
	}
	return &core.EvictionWarning{Addr: addr, Policy: p}
}

// evictWatch schedules the background checks of one store. It is a value of
// its own, apart from the Store, so that its timer does not keep the Store
// alive: a store dropped without Close stops being checked.
type evictWatch struct {
	every   time.Duration // evictionCheckEvery when the store was built
	gap     time.Duration // reconnectCheckGap when the store was built
	mu      sync.Mutex
	timer   *time.Timer
	closed  bool
	running bool
	last    time.Time // when the last check started
}

// watchEviction starts the background checks of s (see Check), when
// someone hears their warnings.
func (s *Store) watchEviction(w *evictWatch) {
	if s.opts.OnWarning == nil {
		return
	}
	s.watch = w
	w.every, w.gap = evictionCheckEvery, reconnectCheckGap
	w.start(weak.Make(s))
}

// start runs the first check at once and each next one evictionCheckEvery
// after the last ended, while the store is reachable and not closed.
func (w *evictWatch) start(wp weak.Pointer[Store]) {
	var tick func()
	tick = func() {
		w.mu.Lock()
		if w.closed || w.running {
			w.mu.Unlock()
			return
		}
		w.running, w.last = true, time.Now()
		w.mu.Unlock()
		if s := wp.Value(); s != nil {
			s.checkAndReport(w)
		}
		w.mu.Lock()
		w.running = false
		if !w.closed && wp.Value() != nil {
			w.timer = time.AfterFunc(w.every, tick)
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.timer = time.AfterFunc(0, tick)
	w.mu.Unlock()
}

func (s *Store) checkAndReport(w *evictWatch) {
	ctx, cancel := context.WithTimeout(context.Background(), evictionCheckTimeout)
	err := s.Check(ctx)
	cancel()
	if err == nil {
		return
	}
	warns := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		warns = j.Unwrap()
	}
	for _, e := range warns {
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if closed {
			return
		}
		s.opts.OnWarning(e)
	}
}

// reconnected brings the next check forward: a new connection may be to
// another server (a failover, a restart with another configuration).
func (w *evictWatch) reconnected() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.running || w.timer == nil || time.Since(w.last) < w.gap {
		return
	}
	if w.timer.Stop() {
		w.timer.Reset(0)
	}
}

// stop ends the background checks; a check under way reports nothing more.
func (w *evictWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
