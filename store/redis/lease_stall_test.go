package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// TestAcquireStallFreesSlots: the server stalls 300 ms (DEBUG SLEEP 0.3)
// under a 50 ms Timeout, so both Acquires of a limit of 2 end with an
// unknown outcome, yet both scripts run when the stall ends. The limiter
// must give those leases back: both slots are free again soon after the
// stall (within the bound Limiter.Acquire states: 21 attempt deadlines,
// 1.05 s here), not after LeaseTTL (a minute). Under every failure mode.
func TestAcquireStallFreesSlots(t *testing.T) {
	srv := startServer(t)
	for _, mode := range []core.FailureMode{core.FailClosed, core.FailOpen, core.FailFallback} {
		t.Run(mode.String(), func(t *testing.T) {
			rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr})
			t.Cleanup(func() { _ = rdb.Close() })
			s := New(rdb, nil)
			t.Cleanup(func() { _ = s.Close() })
			testStallFreesSlots(t, s, srv.admin, mode)
		})
	}
}

// testStallFreesSlots runs the stall scenario against store s, on the
// server admin talks to.
func testStallFreesSlots(t *testing.T, s store.Store, admin *goredis.Client, mode core.FailureMode) {
	t.Helper()
	p := core.Policy{Name: "stall-" + mode.String(), Limit: 2, Window: time.Minute, LeaseTTL: time.Minute}
	cfg := core.Config{Policy: p, Algorithm: algorithm.Concurrency{}, Store: s, Timeout: 50 * time.Millisecond, Failure: mode}
	if mode == core.FailFallback {
		fb, err := core.New(core.Config{Policy: p, Algorithm: algorithm.Concurrency{}, Store: memory.New(nil)})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Fallback = fb
	}
	lim, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := "stalled-" + t.Name()
	key := lim.Key(id).String()
	t.Cleanup(func() { admin.Del(context.Background(), key) })

	// Warm up: the script is cached and connections are open.
	ls, d, err := lim.Acquire(ctx, id)
	if err != nil || !d.Allowed {
		t.Fatalf("warm-up Acquire = %+v, %v", d, err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}

	stalled := make(chan error, 1)
	go func() { stalled <- admin.Do(context.Background(), "debug", "sleep", "0.3").Err() }()
	time.Sleep(30 * time.Millisecond) // the DEBUG SLEEP has reached the server

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ls *core.Lease
			ls, _, errs[i] = lim.Acquire(ctx, id)
			if errs[i] == nil {
				// Degraded (fail open) or the fallback's: released at once.
				_ = ls.Release(ctx)
			}
		}()
	}
	wg.Wait()
	if err := <-stalled; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	ended := time.Now()
	for i, err := range errs {
		if mode == core.FailClosed && !errors.Is(err, core.ErrOutcomeUnknown) {
			t.Fatalf("Acquire %d during the stall: %v; want an unknown outcome", i, err)
		}
		if mode != core.FailClosed && err != nil {
			t.Fatalf("Acquire %d during the stall: %v; the failure policy should decide", i, err)
		}
	}

	// Both slots must be free again well within the stated bound.
	const bound = 21 * 50 * time.Millisecond
	for {
		a, da, erra := lim.Acquire(ctx, id)
		b, db, errb := lim.Acquire(ctx, id)
		free := erra == nil && errb == nil && da.Allowed && db.Allowed && !da.Degraded && !db.Degraded
		for _, ls := range []*core.Lease{a, b} {
			_ = ls.Release(ctx)
		}
		if free {
			t.Logf("both slots free %s after the stall ended", time.Since(ended).Round(time.Millisecond))
			return
		}
		if time.Since(ended) > bound+2*time.Second { // a margin for a loaded machine
			n, _ := admin.ZCard(ctx, key).Result()
			t.Fatalf("%s after the stall, the limit is still held (%d leases in the store; LeaseTTL is %s)", time.Since(ended).Round(time.Millisecond), n, p.LeaseTTL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
