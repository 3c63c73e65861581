package core

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// seenNows is an algorithm that records the now of every Step.
type seenNows struct{ nows *[]int64 }

func (seenNows) Name() string          { return "seen" }
func (seenNows) Quota(p *Policy) int64 { return p.Limit }
func (a seenNows) Step(state []byte, now, n int64, p *Policy) ([]byte, time.Duration, Decision) {
	*a.nows = append(*a.nows, now)
	return []byte{1}, time.Hour, Decision{Allowed: true, Limit: p.Limit}
}

// tickingSwaps advances a clock on every Swap: time passes while a swap is
// on the wire.
type tickingSwaps struct {
	*casMem
	clock *ManualClock
}

func (b tickingSwaps) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (bool, error) {
	b.clock.Advance(time.Second)
	return b.casMem.Swap(ctx, key, token, next, ttl)
}

type tickingStore struct{ b tickingSwaps }

func (s tickingStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	_, err := store.CASUpdate(ctx, s.b, key.String(), m, store.RetryPolicy{BaseBackoff: time.Nanosecond})
	return err
}

// TestCASUpdateRetimes: each attempt of the CAS loop decides at the time of
// that attempt, not at the time the call began.
func TestCASUpdateRetimes(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	clock := NewManualClock(start)
	mem := newCASMem()
	mem.conflict = 2
	var nows []int64
	l := newTestLimiter(t, Config{
		Store: tickingStore{tickingSwaps{mem, clock}}, Algorithm: seenNows{&nows}, Clock: clock,
		Policy: Policy{Name: "api", Limit: 1, Window: time.Second},
	})
	if _, err := l.Allow(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	s := start.UnixMicro()
	if want := []int64{s, s + 1e6, s + 2e6}; !slices.Equal(nows, want) {
		t.Fatalf("attempts decided at %v, want %v", nows, want)
	}
}
