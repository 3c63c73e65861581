package redis

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// TestPoolSpikeKeepsSteadyTenantsAtTheirBase: on a real Redis, three
// tenants share a burst pool above a base of 1 per second each; one spikes
// at 20 per second for a minute, two send exactly their base. Every
// request of the steady tenants is admitted; the spiking tenant gets its
// base plus no more than its share of the pool. Three instances (store
// clients) decide concurrently; the clock is injected (the scripts decide
// at it), one step per 100 ms.
func TestPoolSpikeKeepsSteadyTenantsAtTheirBase(t *testing.T) {
	clock := core.NewManualClock(time.Now().Truncate(time.Minute))
	prefix := fmt.Sprintf("sluice-test-pool-%d", time.Now().UnixNano())
	newPool := func() *core.Pool {
		s := newStore(t, nil)
		mk := func(p core.Policy) *core.Limiter {
			l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: s, Clock: clock, Prefix: prefix, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		p, err := core.NewPool(core.PoolConfig{
			Base:  mk(core.Policy{Name: "base", Limit: 60, Window: time.Minute, Burst: 5}),
			Share: mk(core.Policy{Name: "share", Limit: 30, Window: time.Minute, Burst: 10}),
			Pool:  mk(core.Policy{Name: "pool", Limit: 60, Window: time.Minute, Burst: 20}),
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fleet := []*core.Pool{newPool(), newPool(), newPool()}
	tenants := []struct {
		name    string
		perTick int // requests per 100 ms step
		every   int // ...on every this many steps
	}{{"spike", 2, 1}, {"steady-a", 1, 10}, {"steady-b", 1, 10}}
	var offered, admitted, pooled [3]atomic.Int64
	var failed atomic.Value
	for step := 0; step < 600; step++ {
		var wg sync.WaitGroup
		for ti, tn := range tenants {
			if step%tn.every != 0 {
				continue
			}
			for k := 0; k < tn.perTick; k++ {
				p := fleet[(step+ti+k)%len(fleet)]
				wg.Go(func() {
					offered[ti].Add(1)
					d, err := p.Allow(t.Context(), tn.name)
					if err != nil {
						failed.CompareAndSwap(nil, err)
						return
					}
					if d.Allowed {
						admitted[ti].Add(1)
						if d.FromPool {
							pooled[ti].Add(1)
						}
					}
				})
			}
		}
		wg.Wait()
		clock.Advance(100 * time.Millisecond)
	}
	if err := failed.Load(); err != nil {
		t.Fatalf("a decision failed: %v", err)
	}
	for ti, tn := range tenants {
		t.Logf("%s: offered %d, admitted %d (%d from the pool)", tn.name, offered[ti].Load(), admitted[ti].Load(), pooled[ti].Load())
	}
	for ti := 1; ti < 3; ti++ {
		if admitted[ti].Load() != offered[ti].Load() {
			t.Errorf("%s sent its base rate and got %d of %d through while another tenant spiked", tenants[ti].name, admitted[ti].Load(), offered[ti].Load())
		}
	}
	// A minute: the base's 60 (+ its burst of 5) and at most the share's
	// 30 (+ 10): never the pool's whole.
	if got := admitted[0].Load(); got > 65+40 || got < 60 {
		t.Errorf("spiking tenant: %d admitted in a minute, want between its base (60) and base + share (105)", got)
	}
	if pooled[0].Load() == 0 {
		t.Error("the spiking tenant drew nothing from the pool")
	}
}
