package memory

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/inproc"
	"github.com/sluicehq/sluice/store"
)

// Store is an in-process store.Store: see the package doc. It is safe for
// concurrent use. Create it with New and stop it with Close.
type Store struct {
	shards []shard
	mask   uint64
	keys   keyHasher
	clock  core.Clock // nil: the system clock

	closeOnce sync.Once
	stop      chan struct{} // closed by Close; nil without a sweeper
	done      chan struct{} // closed when the sweeper has returned
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Deleter    = (*Store)(nil)
	_ inproc.InProcess = (*Store)(nil)
	_ store.Closer     = (*Store)(nil)
)

// New returns a Store configured by opts (nil means all defaults) and starts
// its sweeper unless opts.SweepInterval is negative. Call Close to stop it.
func New(opts *Options) *Store {
	c := opts.config()
	s := &Store{
		shards: make([]shard, c.shards),
		mask:   uint64(c.shards - 1),
		keys:   newKeyHasher(),
		clock:  c.clock,
	}
	base, extra := c.maxKeys/c.shards, c.maxKeys%c.shards
	for i := range s.shards {
		limit := base
		if i < extra {
			limit++
		}
		s.shards[i].init(limit)
	}
	if c.sweep > 0 {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.sweeper(c.sweep)
	}
	return s
}

// InProcess marks the store as answering without I/O: the Limiter sets no
// deadline on its calls.
func (*Store) InProcess() {}

// now reads the store's clock, in µs since the Unix epoch: the time line of
// the Limiter's decisions (see Update).
func (s *Store) now() int64 {
	if s.clock == nil {
		return time.Now().UnixMicro()
	}
	return s.clock.Now().UnixMicro()
}

func (s *Store) shard(k mapKey) *shard { return &s.shards[k.h0&s.mask] }

// Update applies m to key's state atomically, holding the key's shard lock
// across m.Apply. Apply sees nil for a key that is absent or expired, and
// otherwise the key's own state, which it may rewrite in place. A nil next
// leaves the key as it was; a ttl <= 0 deletes it (it would read as absent at
// once); otherwise next is kept, expiring ttl from now.
//
// Now is the decision's own time when m carries one (inproc.Timed: every
// Limiter's mutation does), so a key expires on the very clock its
// algorithm's TTL was computed on, and the store reads no clock on the
// decision path; otherwise it is Options.Clock.
//
// A new key never finds the store full: when its shard holds its share of
// Options.MaxKeys, the key that expires first among a few is evicted to
// make room (see the package doc). The only errors are ErrClosed, after
// Close, and one for a nil m, with nothing written. ctx is not consulted: the call never waits
// for anything but the shard lock.
func (s *Store) Update(_ context.Context, key store.Key, m store.Mutation) error {
	if s.shards == nil {
		return errNotMade
	}
	if m == nil {
		return errNilMutation
	}
	k := s.keys.hash(key)
	sh := s.shard(k)
	sh.mu.Lock()
	// A defer, not an Unlock after the step: a Mutation or Algorithm of the
	// user's that panics must not leave every key of the shard locked.
	defer sh.mu.Unlock()
	if sh.closed {
		return ErrClosed
	}
	// The decision's time is read under the lock (a Limiter's mutation
	// reads its clock again: inproc.Retimer), so that the decisions of a
	// shard step at times in the order they hold its lock. Read before it,
	// a decision could take the lock after one that read the clock later:
	// a step back of the clock, which a Limiter that clamps for clock skew
	// (one with a Clock of its own; a Multi) would take for a clock behind,
	// and pull the newer state back to it, giving its units out again.
	var now int64
	if t, ok := m.(inproc.Timed); ok {
		if rt, ok := m.(inproc.Retimer); ok {
			rt.Retime()
		}
		now = t.Now()
	} else {
		now = s.now()
	}
	sk := k.slot()
	sl, state := sh.open(sk, now)
	next, ttl := m.Apply(state)
	sh.commit(sk, sl, now, next, ttl)
	return nil
}

// open returns k's slot (nil when absent) and the state a step must see at
// now: empty when absent or expired, every algorithm reading an empty state
// as absent. The empty state is the expired slot's own buffer, or the
// shard's scratch for a new key, with their capacity, so that the step
// writes the fresh state in place instead of allocating it. The caller
// holds sh.mu.
func (sh *shard) open(k slotKey, now int64) (*slot, []byte) {
	sl := sh.find(k)
	switch {
	case sl == nil:
		return nil, sh.scratch[:0]
	case now < sl.expires:
		return sl, sh.t.state(sl)
	default:
		return sl, sh.t.state(sl)[:0]
	}
}

// commit writes what a step returned for the key k, whose slot open found
// as sl: a nil next leaves the key as it was, a ttl <= 0 deletes it,
// anything else is kept until now + ttl. The caller holds sh.mu.
func (sh *shard) commit(k slotKey, sl *slot, now int64, next []byte, ttl time.Duration) {
	switch {
	case next == nil:
		return
	case ttl <= 0:
		if sl != nil {
			sh.remove(k)
		}
		return
	}
	if sl == nil {
		sl = sh.place(k, now)
	}
	if sl == &sh.front {
		sh.peek.withdraw()
	}
	sh.t.setState(sl, next)
	sl.expires = expiry(now, ttl)
	if sl.expires < sh.next {
		sh.next = sl.expires
	}
}

var _ inproc.Binder = (*Store)(nil)

// Bind returns the fast path of a Limiter's Allow on this store (see
// inproc.Binder): the namespace is hashed once, here, and each decision runs
// the algorithm's step under the shard lock with no Mutation, exactly as
// Update would run a Limiter's. Keys written through it and through Update
// are the same keys.
func (s *Store) Bind(namespace string) inproc.Taker {
	if s.shards == nil {
		return notMade{}
	}
	return &taker{s: s, ns: s.keys.namespace(namespace)}
}

// errNotMade is every call's error on a Store that New did not make (a
// zero Store): it has no shards and no hash seeds.
// errNilMutation is Update's error for a nil Mutation.
var errNilMutation = &store.Error{Op: "update", Err: errors.New("sluice/memory: Update: nil mutation")}

var errNotMade = &store.Error{Op: "update", Err: errors.New("sluice/memory: the Store was not made by New")}

// notMade is the Taker of a Store that New did not make.
type notMade struct{}

func (notMade) Take(string, core.Algorithm, int64, int64, *core.Policy) (core.Decision, error) {
	return core.Decision{}, errNotMade
}

func (notMade) TakeFields(string, core.Algorithm, int64, int64, *core.Policy) (bool, bool, int64, int64, time.Duration, time.Duration, time.Duration, error) {
	return false, false, 0, 0, 0, 0, 0, errNotMade
}

type taker struct {
	s  *Store
	ns nsHash
}

// Take runs alg.Step for n units at now on identity's state (inproc.Taker).
// Its errors are Update's.
func (t *taker) Take(identity string, alg core.Algorithm, now, n int64, p *core.Policy) (core.Decision, error) {
	a, g, lim, rem, retry, reset, delay, err := t.TakeFields(identity, alg, now, n, p)
	return core.Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}, err
}

var _ inproc.FieldTaker = (*taker)(nil)

// TakeFields is Take with the Decision's fields apart (inproc.FieldTaker):
// what a Limiter calls.
func (t *taker) TakeFields(identity string, alg core.Algorithm, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error) {
	k := t.s.keys.identity(t.ns, identity)
	sh := t.s.shard(k)
	sk := k.slot()
	// A refusal of the front key is decided from its copy, without the
	// lock, when there is one (see peekSlot).
	if w0, w1, w2, size, ok := sh.peek.read(sk, now); ok {
		if pk, ok := alg.(inproc.Peeker); ok {
			if a, g, lim, rem, retry, reset, delay, ok := pk.Peek(w0, w1, w2, size, now, n, p); ok {
				return a, g, lim, rem, retry, reset, delay, nil
			}
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock() // see Update
	if sh.closed {
		return false, false, 0, 0, 0, 0, 0, ErrClosed
	}
	sl, state := sh.open(sk, now)
	// The built-in steps are called directly, not through the interface:
	// a call through it goes by the method's wrapper, a frame more, and
	// copies the six-word Decision once more on the way back (4.5 ns of 75
	// a decision serially on a hot key). Any other algorithm is called
	// through the interface.
	var next []byte
	var ttl time.Duration
	var d core.Decision
	switch a := alg.(type) {
	case algorithm.GCRA:
		next, ttl, d = a.Step(state, now, n, p)
	case algorithm.TokenBucket:
		next, ttl, d = a.Step(state, now, n, p)
	case algorithm.FixedWindow:
		next, ttl, d = a.Step(state, now, n, p)
	case algorithm.SlidingCounter:
		next, ttl, d = a.Step(state, now, n, p)
	case algorithm.LeakyBucket:
		next, ttl, d = a.Step(state, now, n, p)
	case algorithm.SlidingLog:
		next, ttl, d = a.Step(state, now, n, p)
	default:
		next, ttl, d = alg.Step(state, now, n, p)
	}
	if next == nil {
		// Nothing written: the front key's state may serve the next
		// refusals without the lock.
		if sl == &sh.front && now < sl.expires && sl.meta&slotLong == 0 {
			if _, ok := alg.(inproc.Peeker); ok {
				sh.peek.publish(sk, sl.expires, state)
			}
		}
		return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, nil
	}
	sh.commit(sk, sl, now, next, ttl)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, nil
}

// TakeFieldsClocked is TakeFields with the decision's time read by clock
// under the shard's lock (inproc.ClockedTaker), for a Limiter whose step
// is clamped for clock skew (one with a Clock of its own). Read before the
// lock, a decision could take it after one that read the clock later, and
// the clamp would take that for a clock behind: it would pull the newer
// state back to the earlier time and give its units out again. Under the
// lock, the decisions of a shard step at times in the order they hold it.
func (t *taker) TakeFieldsClocked(identity string, alg core.Algorithm, clock func() int64, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error) {
	k := t.s.keys.identity(t.ns, identity)
	sh := t.s.shard(k)
	sk := k.slot()
	sh.mu.Lock()
	defer sh.mu.Unlock() // see Update
	if sh.closed {
		return false, false, 0, 0, 0, 0, 0, ErrClosed
	}
	now := clock()
	sl, state := sh.open(sk, now)
	next, ttl, d := alg.Step(state, now, n, p)
	if next != nil {
		sh.commit(sk, sl, now, next, ttl)
	}
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, nil
}

// expiry is now + ttl in µs, the ttl rounded up so that a key never expires
// before its TTL is over, saturating rather than wrapping.
func expiry(now int64, ttl time.Duration) int64 {
	us := int64(ttl / time.Microsecond)
	if ttl%time.Microsecond != 0 {
		us++
	}
	if us > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + us
}

// Delete removes key, if present. It returns ErrClosed after Close, and nil
// otherwise.
func (s *Store) Delete(_ context.Context, key store.Key) error {
	if s.shards == nil {
		return errNotMade
	}
	k := s.keys.hash(key)
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return ErrClosed
	}
	sh.remove(k.slot())
	return nil
}

// Evictions returns how many live (unexpired) keys have been evicted to
// make room for new ones since the store was created (see the package doc:
// each can have admitted up to one more quota). Expired keys reclaimed are
// not counted. Like Len it locks one shard at a time; it is for metrics.
func (s *Store) Evictions() uint64 {
	var n uint64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.evictions
		sh.mu.Unlock()
	}
	return n
}

// Len returns the number of live (unexpired) keys: 0 after Close. It locks
// one shard at a time and visits every slot, so it is for tests and metrics,
// not for the decision path; under concurrent updates it is a snapshot of
// each shard, not of the whole store.
func (s *Store) Len() int {
	now := s.now()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.live(now)
		sh.mu.Unlock()
	}
	return n
}

// Close stops the sweeper, waits for it to return, and drops every key.
// Later calls to Update and Delete return ErrClosed. Close is idempotent and
// safe for concurrent use: every call returns once the store is closed. It
// always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			sh.peek.withdraw()
			sh.closed, sh.front, sh.t = true, slot{}, table{}
			sh.mu.Unlock()
		}
	})
	return nil
}
