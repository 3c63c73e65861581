package memory

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// hammer sends requests from many goroutines, spread over several Limiter
// instances that share the store, at one identity, and returns how many
// were admitted. The clock does not move, so the exact quota is the bound.
func hammer(t *testing.T, s *Store, alg core.Algorithm, p core.Policy, clock core.Clock, goroutines, each int) int64 {
	t.Helper()
	limiters := make([]*core.Limiter, 4)
	for i := range limiters {
		limiters[i] = newLimiter(t, s, alg, p, clock)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		l := limiters[g%len(limiters)]
		wg.Go(func() {
			for range each {
				d, err := l.Allow(context.Background(), "shared")
				if err != nil {
					t.Errorf("Allow: %v", err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

func TestConcurrentDecisionsOnOneKeyAdmitExactlyTheQuota(t *testing.T) {
	for _, tt := range []struct {
		name string
		alg  core.Algorithm
		p    core.Policy
	}{
		{"counter", counter{}, core.PerMinute("api", 1000)},
		{"gcra", algorithm.GCRA{}, core.Policy{Name: "api", Limit: 10, Window: time.Second, Burst: 1000}},
		{"token-bucket", algorithm.TokenBucket{}, core.Policy{Name: "api", Limit: 10, Window: time.Second, Burst: 1000}},
		{"fixed-window", algorithm.FixedWindow{}, core.PerMinute("api", 1000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := core.NewManualClock(epoch)
			s := newStore(t, &Options{Clock: clock})
			quota := tt.alg.Quota(&tt.p)
			if got := hammer(t, s, tt.alg, tt.p, clock, 16, int(quota)/4); got != quota {
				t.Fatalf("admitted %d of %d requests, want exactly the quota %d", got, 4*quota, quota)
			}
		})
	}
}

// Many keys, sweeps, deletes and reads at once, for the race detector; and
// every key still admits exactly its quota.
func TestConcurrentMixedUse(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: time.Millisecond, Shards: 4})
	l := newLimiter(t, s, counter{}, core.PerMinute("api", 10), clock)
	const keys, goroutines = 50, 8
	var admitted [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range 40 * keys {
				k := (i + g) % keys
				d, err := l.Allow(context.Background(), strconv.Itoa(k))
				if err != nil {
					t.Errorf("Allow: %v", err)
					return
				}
				if d.Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.Len()
			s.Sweep()
			// Keys outside the limited set, so the counts above stay exact.
			if err := s.Update(context.Background(), key("other-"+strconv.Itoa(i%100)), &put{next: []byte{1}, ttl: time.Second}); err != nil {
				t.Errorf("Update: %v", err)
			}
			if err := s.Delete(context.Background(), key("other-"+strconv.Itoa((i+50)%100))); err != nil {
				t.Errorf("Delete: %v", err)
			}
		}
	})
	wg.Wait()
	close(stop)
	side.Wait()
	for k := range keys {
		if got := admitted[k].Load(); got != 10 {
			t.Errorf("key %d: %d admitted, want exactly 10", k, got)
		}
	}
}

// Leases (the concurrency algorithm's Acquire and Release) on one key: the
// work in flight never exceeds the limit.
func TestConcurrentLeasesNeverExceedTheLimit(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock})
	p := core.Policy{Name: "jobs", Limit: 5, Window: time.Minute}
	l := newLimiter(t, s, algorithm.Concurrency{}, p, clock)
	var inFlight, peak, acquired atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ctx := context.Background()
			for range 300 {
				lease, d, err := l.Acquire(ctx, "shared")
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if !d.Allowed {
					continue
				}
				acquired.Add(1)
				n := inFlight.Add(1)
				for {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
				if n > p.Limit {
					t.Errorf("%d leases in flight, limit %d", n, p.Limit)
				}
				inFlight.Add(-1)
				if err := lease.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if acquired.Load() < p.Limit {
		t.Errorf("only %d leases acquired in all, want at least the limit %d", acquired.Load(), p.Limit)
	}
	// Every lease was released: the key holds none, so a fresh limit is
	// whole.
	for i := range p.Limit {
		if _, d, err := l.Acquire(context.Background(), "shared"); err != nil || !d.Allowed {
			t.Fatalf("lease %d after every release: %+v, %v; want admitted", i+1, d, err)
		}
	}
	t.Logf("%d leases acquired, at most %d at once", acquired.Load(), peak.Load())
}
