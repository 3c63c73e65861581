package memory

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// counter is a fixed-window count, the smallest honest algorithm: 16 bytes
// of state (the window's start and the count, in µs and units), rewritten
// in place, so only a new or expired key allocates. It lets this package be
// tested without the algorithm package.
type counter struct{}

func (counter) Name() string               { return "test-counter" }
func (counter) Quota(p *core.Policy) int64 { return p.Limit }

func (counter) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	w := p.WindowMicros()
	start := now - now%w
	if now < 0 && now%w != 0 {
		start -= w
	}
	var count int64
	if len(state) == 16 && int64(binary.LittleEndian.Uint64(state)) == start {
		count = int64(binary.LittleEndian.Uint64(state[8:]))
	}
	reset := core.Micros(start + w - now)
	d := core.Decision{Limit: p.Limit, Remaining: p.Limit - count, ResetAfter: reset}
	if count+n > p.Limit {
		d.RetryAfter = reset
		return nil, 0, d
	}
	count += n
	if len(state) != 16 {
		state = make([]byte, 16)
	}
	binary.LittleEndian.PutUint64(state, uint64(start))
	binary.LittleEndian.PutUint64(state[8:], uint64(count))
	d.Allowed, d.Remaining = true, p.Limit-count
	return state, reset, d
}

// fn is a Mutation made of a function, to see exactly what Update hands
// Apply and to return anything at all.
type fn func(state []byte) ([]byte, time.Duration)

func (f fn) Apply(state []byte) ([]byte, time.Duration) { return f(state) }

// put is a Mutation that stores next with ttl and records what it saw.
type put struct {
	next  []byte
	ttl   time.Duration
	calls int
	saw   []byte
}

func (p *put) Apply(state []byte) ([]byte, time.Duration) {
	p.calls++
	p.saw = state
	return p.next, p.ttl
}

// read returns key's state as Update would hand it to Apply (nil when absent
// or expired), without changing it.
func read(t *testing.T, s *Store, key store.Key) []byte {
	t.Helper()
	var got []byte
	seen := false
	err := s.Update(context.Background(), key, fn(func(state []byte) ([]byte, time.Duration) {
		got, seen = append([]byte(nil), state...), len(state) > 0
		return nil, 0
	}))
	if err != nil {
		t.Fatalf("Update(%v) to read: %v", key, err)
	}
	if !seen {
		return nil
	}
	return got
}

func write(t *testing.T, s *Store, key store.Key, state []byte, ttl time.Duration) {
	t.Helper()
	if err := s.Update(context.Background(), key, &put{next: state, ttl: ttl}); err != nil {
		t.Fatalf("Update(%v): %v", key, err)
	}
}

// stored counts the entries the store holds, expired or not.
func stored(s *Store) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.keys()
		sh.mu.Unlock()
	}
	return n
}

func newStore(t *testing.T, opts *Options) *Store {
	t.Helper()
	s := New(opts)
	t.Cleanup(func() { s.Close() })
	return s
}

func newLimiter(t testing.TB, s store.Store, alg core.Algorithm, p core.Policy, clock core.Clock) *core.Limiter {
	t.Helper()
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Clock: clock})
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return l
}

func key(id string) store.Key { return store.Key{Namespace: "test:p", Identity: id} }

// epoch is where the tests' manual clocks start: a round second, so that a
// window of the counter starts there.
var epoch = time.Unix(1_700_000_000, 0)
