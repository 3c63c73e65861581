package valkey

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
	"weak"

	"github.com/sluicehq/sluice/core"
	valkeygo "github.com/valkey-io/valkey-go"
)

// evictionCheckEvery is how often a store reads its servers' eviction
// policy in the background (a variable for the tests).
var evictionCheckEvery = time.Minute

// evictionCheckTimeout bounds one background check.
const evictionCheckTimeout = 2 * time.Second

// Check reads the maxmemory-policy of every node the client knows
// (valkeygo.Client.Nodes: the server, or each node of a cluster) with CONFIG
// GET. It returns nil when no node may evict limiter keys (noeviction), and
// otherwise one *core.EvictionWarning (matching core.ErrEvictable) per node
// that may, joined: a policy other than noeviction (volatile-* included,
// since every limiter key has a TTL), or one that could not be read (CONFIG
// renamed or forbidden, an unreachable node), reported as Policy "unknown".
// Check changes nothing and never stops the store from deciding.
//
// When Options.OnWarning is set, the store runs the same check by itself,
// in the background, and hands it each warning found: once when the store
// is built and every minute after, never per decision, until Close.
func (s *Store) Check(ctx context.Context) error {
	if err := s.ready(ctx, "check"); err != nil {
		return err
	}
	nodes := s.c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	var warns []error
	for _, a := range addrs {
		if w := evictionWarning(ctx, nodes[a], a); w != nil {
			warns = append(warns, w)
		}
	}
	return errors.Join(warns...)
}

// evictionWarning reads one node's policy: nil when it cannot evict.
func evictionWarning(ctx context.Context, c valkeygo.Client, addr string) *core.EvictionWarning {
	m, err := c.Do(ctx, c.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
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
	every  time.Duration // evictionCheckEvery when the store was built
	mu     sync.Mutex
	timer  *time.Timer
	closed bool
}

// watchEviction starts the background checks of s (see Check), when
// someone hears their warnings.
func (s *Store) watchEviction() {
	if s.onWarning == nil {
		return
	}
	w := &evictWatch{every: evictionCheckEvery}
	s.watch = w
	w.start(weak.Make(s))
}

// start runs the first check at once and each next one w.every after the
// last ended, while the store is reachable and not closed.
func (w *evictWatch) start(wp weak.Pointer[Store]) {
	var tick func()
	tick = func() {
		if s := wp.Value(); s != nil {
			s.checkAndReport(w)
		}
		w.mu.Lock()
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
		s.onWarning(e)
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
