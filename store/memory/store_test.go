package memory

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

func TestUpdateHandsApplyTheKeysOwnState(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	k := key("alice")

	first := &put{next: []byte{1, 2, 3}, ttl: time.Minute}
	if err := s.Update(ctx, k, first); err != nil {
		t.Fatal(err)
	}
	if first.calls != 1 || len(first.saw) != 0 {
		t.Fatalf("new key: Apply called %d times with %v, want once with an empty state", first.calls, first.saw)
	}

	// Apply rewrites the state in place and returns it: the next Apply must
	// see that very array, which is what makes a decision allocation-free.
	var inPlace []byte
	err := s.Update(ctx, k, fn(func(state []byte) ([]byte, time.Duration) {
		if !bytes.Equal(state, []byte{1, 2, 3}) {
			t.Errorf("second Apply saw %v, want [1 2 3]", state)
		}
		state[0] = 9
		inPlace = state
		return state, time.Minute
	}))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, k, fn(func(state []byte) ([]byte, time.Duration) {
		if &state[0] != &inPlace[0] {
			t.Errorf("Apply got a copy of the state, want the key's own array")
		}
		return nil, 0
	}))
	if err != nil {
		t.Fatal(err)
	}

	// A nil next leaves the state as it was.
	if got := read(t, s, k); !bytes.Equal(got, []byte{9, 2, 3}) {
		t.Fatalf("state after a nil next = %v, want [9 2 3]", got)
	}

	// A longer next (reallocated by Apply) is what is kept.
	write(t, s, k, []byte{4, 5, 6, 7, 8}, time.Minute)
	if got := read(t, s, k); !bytes.Equal(got, []byte{4, 5, 6, 7, 8}) {
		t.Fatalf("state after a longer next = %v, want [4 5 6 7 8]", got)
	}
}

func TestNilNextOnNewKeyWritesNothing(t *testing.T) {
	s := newStore(t, nil)
	write(t, s, key("bob"), nil, time.Minute)
	if n := s.Len(); n != 0 {
		t.Fatalf("Len after a nil next on a new key = %d, want 0", n)
	}
}

func TestNonPositiveTTLDeletes(t *testing.T) {
	for _, ttl := range []time.Duration{0, -time.Second} {
		s := newStore(t, nil)
		k := key("carol")
		write(t, s, k, []byte{1}, time.Minute)
		write(t, s, k, []byte{2}, ttl)
		if got := read(t, s, k); got != nil {
			t.Errorf("ttl %v: state = %v, want absent", ttl, got)
		}
		write(t, s, key("dave"), []byte{3}, ttl)
		if n := stored(s); n != 0 {
			t.Errorf("ttl %v: %d entries stored, want 0", ttl, n)
		}
	}
}

func TestDelete(t *testing.T) {
	s := newStore(t, nil)
	ctx := context.Background()
	write(t, s, key("a"), []byte{1}, time.Minute)
	write(t, s, key("b"), []byte{2}, time.Minute)
	if err := s.Delete(ctx, key("a")); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got := read(t, s, key("a")); got != nil {
		t.Errorf("deleted key reads %v, want absent", got)
	}
	if got := read(t, s, key("b")); !bytes.Equal(got, []byte{2}) {
		t.Errorf("other key reads %v, want [2]", got)
	}
	if err := s.Delete(ctx, key("never")); err != nil {
		t.Errorf("Delete of an absent key: %v, want nil", err)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
}

func TestKeysAreNamespaceAndIdentity(t *testing.T) {
	s := newStore(t, nil)
	keys := []store.Key{
		{Namespace: "a:b", Identity: "c"},
		{Namespace: "a", Identity: "b:c"},
		{Namespace: "a:b:c", Identity: ""},
		{Namespace: "", Identity: "a:b:c"},
		{Namespace: "a", Identity: "b\x00c"},
		{Namespace: "a\x00b", Identity: "c"},
		{Namespace: "other:b", Identity: "c"},
	}
	for i, k := range keys {
		write(t, s, k, []byte{byte(i)}, time.Minute)
	}
	for i, k := range keys {
		if got := read(t, s, k); !bytes.Equal(got, []byte{byte(i)}) {
			t.Errorf("key %q/%q reads %v, want [%d]: two keys share a state", k.Namespace, k.Identity, got, i)
		}
	}
	if n := s.Len(); n != len(keys) {
		t.Errorf("Len = %d, want %d", n, len(keys))
	}
}

func TestLimiterOverStore(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock})
	l := newLimiter(t, s, counter{}, core.PerMinute("api", 3), clock)
	ctx := context.Background()
	for i := range 3 {
		d, err := l.Allow(ctx, "alice")
		if err != nil || !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("request %d: %+v, %v; want allowed with %d remaining", i+1, d, err, 2-i)
		}
	}
	if d, err := l.Allow(ctx, "alice"); err != nil || d.Allowed {
		t.Fatalf("request 4: %+v, %v; want denied", d, err)
	}
	if d, err := l.Allow(ctx, "bob"); err != nil || !d.Allowed {
		t.Fatalf("another identity: %+v, %v; want allowed", d, err)
	}
	if err := l.Reset(ctx, "alice"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if d, err := l.Allow(ctx, "alice"); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("after Reset: %+v, %v; want allowed with 2 remaining", d, err)
	}
}

// A decision on an existing key allocates nothing, through the whole
// Limiter: the pooled mutation, the key hash, the map and the in-place step.
func TestNoAllocationsOnExistingKey(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock})
	l := newLimiter(t, s, counter{}, core.PerSecond("api", 1_000_000), nil)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := l.Allow(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Limiter.Allow on an existing key: %v allocations per call, want 0", allocs)
	}

	m := &put{next: []byte{1}, ttl: time.Minute}
	write(t, s, key("bob"), m.next, m.ttl)
	allocs = testing.AllocsPerRun(1000, func() {
		if err := s.Update(ctx, key("bob"), m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Store.Update on an existing key: %v allocations per call, want 0", allocs)
	}
}

// panicky is an algorithm of the user's that panics in its step.
type panicky struct{ counter }

func (panicky) Step([]byte, int64, int64, *core.Policy) ([]byte, time.Duration, core.Decision) {
	panic("a bug in a user's algorithm")
}

// A step or Mutation that panics leaves its shard unlocked: the other keys
// of the store (one shard here, so every key) keep deciding.
func TestPanicUnlocksTheShard(t *testing.T) {
	// Not newStore: its Close would wait forever on a shard left locked.
	s := New(&Options{Shards: 1, SweepInterval: -1})
	p := core.PerMinute("p", 5)
	for _, call := range []func(){
		func() { _, _ = newLimiter(t, s, panicky{}, p, nil).Allow(context.Background(), "a") },
		func() {
			_ = s.Update(context.Background(), key("a"), fn(func([]byte) ([]byte, time.Duration) { panic("a bug") }))
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			call()
		}()
		done := make(chan error, 1)
		go func() {
			_, err := newLimiter(t, s, counter{}, p, nil).Allow(context.Background(), "b")
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the shard stayed locked after a panic")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
