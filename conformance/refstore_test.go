package conformance

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/inproc"
	"github.com/sluicehq/sluice/store"
)

// refStore is the reference store: a map under one mutex, with expiry by
// the wall clock. It is what every store must behave like.
type refStore struct {
	mu sync.Mutex
	m  map[string]refEntry
	// ttlScale multiplies every TTL (1 when zero), and ttlCap, when not
	// zero, caps it; the faults below use them.
	ttlScale float64
	ttlCap   time.Duration
	// seconds truncates every TTL to whole seconds, and writes nothing for
	// one under a second, as a store with an expires-at column in seconds
	// might.
	seconds bool
	// skew is the clock skew it declares (refSkew when zero), and addSkew
	// lengthens every TTL by it, as a store on the limiters' clocks does.
	skew    time.Duration
	addSkew bool
	// timed expires keys on the decisions' time line (inproc.Timed), as the
	// memory store does, instead of by the wall clock.
	timed bool
	// keyCap and valueCap, when not zero, cut keys and states to that many
	// bytes, as a store with columns of a fixed width might.
	keyCap, valueCap int
	// keepTTL keeps a live key's expiry when it is written again, as an
	// upsert that sets the value alone would.
	keepTTL bool
}

type refEntry struct {
	state   []byte
	expires time.Time
}

func newRefStore() *refStore { return &refStore{m: map[string]refEntry{}} }

// now is the time expiry is judged by for m (nil: the wall clock).
func (s *refStore) now(m store.Mutation) time.Time {
	if t, ok := m.(inproc.Timed); ok && s.timed {
		return time.UnixMicro(t.Now())
	}
	return time.Now()
}

func (s *refStore) load(k string, now time.Time) []byte {
	e, ok := s.m[k]
	if !ok || !now.Before(e.expires) {
		return nil
	}
	return clone(e.state)
}

func (s *refStore) store(k string, next []byte, ttl time.Duration, now time.Time) {
	if s.ttlScale != 0 {
		ttl = time.Duration(float64(ttl) * s.ttlScale)
	}
	if s.addSkew {
		ttl += s.ClockSkew()
	}
	if s.ttlCap != 0 {
		ttl = min(ttl, s.ttlCap)
	}
	if s.valueCap != 0 {
		next = next[:min(len(next), s.valueCap)]
	}
	if s.seconds {
		if ttl = ttl.Truncate(time.Second); ttl <= 0 {
			return
		}
	}
	expires := now.Add(ttl)
	if e, ok := s.m[k]; ok && s.keepTTL && now.Before(e.expires) {
		expires = e.expires
	}
	s.m[k] = refEntry{clone(next), expires}
}

func (s *refStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k, now := key.String(), s.now(m)
	if s.keyCap != 0 {
		k = k[:min(len(k), s.keyCap)]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if next, ttl := m.Apply(s.load(k, now)); next != nil {
		s.store(k, next, ttl, now)
	}
	return nil
}

func (s *refStore) Delete(ctx context.Context, key store.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key.String())
	return nil
}

func (s *refStore) exists(key store.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load(key.String(), time.Now()) != nil
}

// ttl is how long key's state has left, if any.
func (s *refStore) ttl(key store.Key) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key.String()]
	if left := time.Until(e.expires); ok && left > 0 {
		return left, true
	}
	return 0, false
}

// refScriptStore adds a script path to refStore: RunScript runs the
// algorithm the script names through its Go step, under the lock, reading
// the store's clock when the Limiter sends none, as a server does.
type refScriptStore struct{ *refStore }

var _ store.ScriptRunner = refScriptStore{}

func (s refScriptStore) RunScript(ctx context.Context, sc *store.Script, key store.Key, a store.ScriptArgs) (store.ScriptResult, error) {
	var alg core.Algorithm
	for _, x := range algorithm.All() {
		if x.Name() == sc.Name {
			alg = x
		}
	}
	if alg == nil {
		return store.ScriptResult{}, fmt.Errorf("no algorithm runs script %q", sc.Name)
	}
	p := core.Policy{Name: "script", Limit: a.Limit, Window: core.Micros(a.Window), Burst: a.Burst,
		MaxDelay: core.Micros(a.MaxDelay), LeaseTTL: core.Micros(a.LeaseTTL)}
	now := a.Now
	if now == 0 {
		now = time.Now().UnixMicro()
	}
	var d core.Decision
	err := s.Update(ctx, key, mutationFunc(func(state []byte) ([]byte, time.Duration) {
		if l, ok := alg.(core.Leaser); ok {
			if a.Op == store.OpRelease {
				return l.Release(state, now, a.Lease, &p)
			}
			next, ttl, dd := l.Acquire(state, now, a.Lease, &p)
			d = dd
			return next, ttl
		}
		next, ttl, dd := alg.Step(state, now, a.N, &p)
		d = dd
		return next, ttl
	}))
	bit := int64(0)
	if d.Allowed {
		bit = 1
	}
	us := func(x time.Duration) int64 { return int64(x / time.Microsecond) }
	return store.ScriptResult{bit, d.Limit, d.Remaining, us(d.RetryAfter), us(d.ResetAfter), us(d.Delay)}, err
}

type mutationFunc func([]byte) ([]byte, time.Duration)

func (f mutationFunc) Apply(state []byte) ([]byte, time.Duration) { return f(state) }

// racyStore is refStore without atomicity: it reads under the lock, lets
// other goroutines run, and writes under the lock — a lost update waiting
// to happen, as a store that does GET then SET would be.
type racyStore struct{ *refStore }

func (s racyStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	k, now := key.String(), s.now(m)
	s.mu.Lock()
	state := s.load(k, now)
	s.mu.Unlock()
	runtime.Gosched()
	time.Sleep(100 * time.Microsecond)
	if next, ttl := m.Apply(state); next != nil {
		s.mu.Lock()
		s.store(k, next, ttl, now)
		s.mu.Unlock()
	}
	return nil
}

// cachingStore is a client that remembers what it last read or wrote for a
// key and trusts that copy instead of asking the backend again: correct for
// one instance, wrong for a fleet.
type cachingStore struct {
	*refStore
	cache map[string][]byte
	mu    sync.Mutex
}

func (s *cachingStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	k, now := key.String(), s.now(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	state, ok := s.cache[k]
	if !ok {
		s.refStore.mu.Lock()
		state = s.load(k, now)
		s.refStore.mu.Unlock()
	}
	next, ttl := m.Apply(clone(state))
	if next != nil {
		s.refStore.mu.Lock()
		s.store(k, next, ttl, now)
		s.refStore.mu.Unlock()
		s.cache[k] = clone(next)
	} else {
		s.cache[k] = clone(state)
	}
	return nil
}

// forgetfulDeleteStore reports success from Delete and deletes nothing.
type forgetfulDeleteStore struct{ *refStore }

func (forgetfulDeleteStore) Delete(context.Context, store.Key) error { return nil }

// binderStore adds a inproc.Binder fast path to refStore, with one of two
// defects: a racy Take is not atomic (its Update is: the Limiter decides
// Allow through Take, so the suite must reach it); a stray Take is atomic
// but writes another key than Update and Delete use, so Reset deletes
// nothing that Allow wrote.
type binderStore struct {
	*refStore
	racy, stray bool
}

func (binderStore) InProcess() {}

func (s binderStore) Bind(ns string) inproc.Taker { return binderTaker{s, ns} }

type binderTaker struct {
	binderStore
	ns string
}

func (t binderTaker) Take(id string, alg core.Algorithm, now, n int64, p *core.Policy) (core.Decision, error) {
	var s store.Store = t.refStore
	if t.racy {
		s = racyStore{t.refStore}
	}
	if t.stray {
		id = "stray:" + id
	}
	var d core.Decision
	err := s.Update(context.Background(), store.Key{Namespace: t.ns, Identity: id}, mutationFunc(func(state []byte) ([]byte, time.Duration) {
		next, ttl, dd := alg.Step(state, now, n, p)
		d = dd
		return next, ttl
	}))
	return d, err
}

// harness hands out clients of one backend. newClient is called once per
// NewStore.
type harness struct {
	backend   *refStore
	newClient func(*refStore) store.Store
	caps      Capabilities
}

func (h *harness) NewStore(t testing.TB) store.Store { return h.newClient(h.backend) }

func (h *harness) Capabilities() Capabilities { return h.caps }

// inspectingHarness is a harness that is also an Inspector.
type inspectingHarness struct{ *harness }

func (h inspectingHarness) Exists(ctx context.Context, key store.Key) (bool, error) {
	return h.backend.exists(key), nil
}

func (h inspectingHarness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	ttl, ok := h.backend.ttl(key)
	return ttl, ok, nil
}

// maker returns a harness maker for the backend's clients.
func maker(newClient func(*refStore) store.Store, caps Capabilities, inspect bool) func(testing.TB) Harness {
	return makerOf(newRefStore, newClient, caps, inspect)
}

func makerOf(backend func() *refStore, newClient func(*refStore) store.Store, caps Capabilities, inspect bool) func(testing.TB) Harness {
	return func(testing.TB) Harness {
		h := &harness{backend: backend(), newClient: newClient, caps: caps}
		if h.backend.skew == 0 {
			h.backend.skew = caps.ClockSkew // the store declares what the harness does
		}
		if inspect {
			return inspectingHarness{h}
		}
		return h
	}
}

func plain(s *refStore) store.Store       { return s }
func scripted(s *refStore) store.Store    { return refScriptStore{s} }
func racy(s *refStore) store.Store        { return racyStore{s} }
func forgetful(s *refStore) store.Store   { return forgetfulDeleteStore{s} }
func racyBinder(s *refStore) store.Store  { return binderStore{refStore: s, racy: true} }
func strayBinder(s *refStore) store.Store { return binderStore{refStore: s, stray: true} }
func caching(s *refStore) store.Store {
	return &cachingStore{refStore: s, cache: map[string][]byte{}}
}
