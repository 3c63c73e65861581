package core

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// counter is a minimal algorithm for core's own tests: at most Limit units
// ever, state = the count so far. It is not one of Sluice's algorithms.
type counter struct{}

func (counter) Name() string          { return "counter" }
func (counter) Quota(p *Policy) int64 { return p.Limit }
func (counter) Step(state []byte, now, n int64, p *Policy) ([]byte, time.Duration, Decision) {
	var used int64
	if len(state) == 8 {
		used = int64(binary.BigEndian.Uint64(state))
	}
	if used+n > p.Limit {
		return nil, 0, Decision{Limit: p.Limit, Remaining: p.Limit - used, RetryAfter: time.Hour}
	}
	used += n
	return binary.BigEndian.AppendUint64(state[:0], uint64(used)), time.Hour,
		Decision{Allowed: true, Limit: p.Limit, Remaining: p.Limit - used}
}

// slots is a minimal Leaser: state = 8-byte lease ids.
type slots struct{}

func (slots) Name() string          { return "slots" }
func (slots) Quota(p *Policy) int64 { return p.Limit }
func (s slots) Step(state []byte, now, n int64, p *Policy) ([]byte, time.Duration, Decision) {
	return s.Acquire(state, now, 0, p)
}
func (slots) Acquire(state []byte, now int64, lease uint64, p *Policy) ([]byte, time.Duration, Decision) {
	held := int64(len(state) / 8)
	if held >= p.Limit {
		return nil, 0, Decision{Limit: p.Limit, RetryAfter: time.Second}
	}
	return binary.BigEndian.AppendUint64(state, lease), time.Hour,
		Decision{Allowed: true, Limit: p.Limit, Remaining: p.Limit - held - 1}
}
func (slots) Release(state []byte, now int64, lease uint64, p *Policy) ([]byte, time.Duration) {
	for i := 0; i+8 <= len(state); i += 8 {
		if binary.BigEndian.Uint64(state[i:]) == lease {
			return append(state[:i:i], state[i+8:]...), time.Hour
		}
	}
	return nil, 0
}

// mapStore is a correct, mutex-guarded store that records what it was asked.
type mapStore struct {
	mu      sync.Mutex
	m       map[string][]byte
	updates int
	err     error         // returned by every Update when set
	block   bool          // Update waits for ctx to end
	delay   time.Duration // Update sleeps this long first
}

func newMapStore() *mapStore { return &mapStore{m: map[string][]byte{}} }

func (s *mapStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if s.block {
		<-ctx.Done()
		return &store.Error{Op: "update", Err: ctx.Err()}
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	if s.err != nil {
		return s.err
	}
	k := key.String()
	next, _ := m.Apply(append([]byte(nil), s.m[k]...))
	if next != nil {
		s.m[k] = next
	}
	return nil
}

func (s *mapStore) Delete(ctx context.Context, key store.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key.String())
	return nil
}

func (s *mapStore) keys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
