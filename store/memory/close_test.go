package memory

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"go.uber.org/goleak"
)

func TestCloseStopsTheSweeper(t *testing.T) {
	s := New(&Options{SweepInterval: time.Millisecond})
	time.Sleep(5 * time.Millisecond) // let the sweeper tick a few times
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t)
}

func TestCloseIsIdempotentAndConcurrent(t *testing.T) {
	s := New(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			// Every Close returns only once the store is closed.
			if err := s.Update(context.Background(), key("a"), &put{next: []byte{1}, ttl: time.Minute}); !errors.Is(err, ErrClosed) {
				t.Errorf("Update after a returned Close: %v, want ErrClosed", err)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	goleak.VerifyNone(t)
}

func TestCallsAfterClose(t *testing.T) {
	s := New(nil)
	ctx := context.Background()
	write(t, s, key("a"), []byte{1}, time.Minute)
	s.Close()

	m := &put{next: []byte{1}, ttl: time.Minute}
	err := s.Update(ctx, key("a"), m)
	if !errors.Is(err, ErrClosed) || !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Update after Close: %v, want ErrClosed matching core.ErrUnavailable", err)
	}
	if m.calls != 0 {
		t.Errorf("Apply called %d times after Close, want 0", m.calls)
	}
	if err := s.Delete(ctx, key("a")); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v, want ErrClosed", err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("Len after Close = %d, want 0", n)
	}
	if n := s.Sweep(); n != 0 {
		t.Errorf("Sweep after Close = %d, want 0", n)
	}

	l := newLimiter(t, s, counter{}, core.PerMinute("api", 5), nil)
	if _, err := l.Allow(ctx, "a"); !errors.Is(err, ErrClosed) || !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Limiter over a closed store: %v, want ErrClosed matching core.ErrUnavailable", err)
	}
	if err := l.Reset(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Reset over a closed store: %v, want ErrClosed", err)
	}
}

// A nil Mutation is an error, not a panic that would leave its shard
// locked.
func TestUpdateRefusesANilMutation(t *testing.T) {
	s := New(nil)
	defer s.Close()
	key := store.Key{Namespace: "sluice:nil", Identity: "a"}
	if err := s.Update(context.Background(), key, nil); err == nil || !strings.Contains(err.Error(), "nil mutation") {
		t.Fatalf("Update with a nil Mutation: %v, want an error naming it", err)
	}
	if s.Len() != 0 {
		t.Fatalf("Update with a nil Mutation wrote %d keys", s.Len())
	}
}

// A sweep interval below MinSweepInterval is raised to it: a nanosecond
// would keep the sweeper running on a core of its own. A typed nil Clock
// is the system clock, as a nil one is, not a panic at the first sweep.
func TestOptionsFloorAndNilClock(t *testing.T) {
	if c := (&Options{SweepInterval: time.Nanosecond}).config(); c.sweep != MinSweepInterval {
		t.Errorf("SweepInterval 1ns: the sweeper runs every %v, want %v", c.sweep, MinSweepInterval)
	}
	s := New(&Options{Clock: (*core.ManualClock)(nil), SweepInterval: -1})
	defer s.Close()
	s.Sweep()
	if n := s.Len(); n != 0 {
		t.Errorf("Len %d on an empty store", n)
	}
}
