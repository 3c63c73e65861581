package valkey_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/valkey"
)

// TestScriptFlushUnderLoad: SCRIPT FLUSH on every node, again and again,
// while limiters decide: each NOSCRIPT is the store's to recover, so no
// caller sees an error.
func TestScriptFlushUnderLoad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		addrs := b.addrs(t)
		admin := newClient(t, addrs)
		var ls []*core.Limiter
		for range 2 {
			l, err := core.New(core.Config{
				Policy: core.Policy{Name: "flush", Limit: 1_000_000, Window: time.Hour}, Algorithm: algorithm.GCRA{},
				Store: valkey.New(newClient(t, addrs), nil), Prefix: "sluice-valkey-test-" + randomHex(t),
				Timeout: fleetTimeout, // this test is about NOSCRIPT, not deadlines
			})
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		const workers, minCalls, maxCalls, minFlushes = 16, 50, 5000, 5
		var flushes atomic.Int64
		stop := make(chan struct{})
		flusherDone := make(chan struct{})
		go func() {
			defer close(flusherDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := flushScripts(t, admin); err != nil {
					t.Errorf("SCRIPT FLUSH: %v", err)
					return
				}
				flushes.Add(1)
				time.Sleep(time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		var calls atomic.Int64
		for w := range workers {
			wg.Go(func() {
				id := "worker-" + randomHex(t)
				// Run until the flusher has flushed a few times, within bounds.
				for i := 0; i < maxCalls && (i < minCalls || flushes.Load() < minFlushes); i++ {
					if _, err := ls[w%2].Allow(context.Background(), id); err != nil {
						t.Errorf("call %d: %v", i, err)
						return
					}
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		close(stop)
		<-flusherDone
		if n := flushes.Load(); n < minFlushes {
			t.Errorf("only %d flushes happened during %d calls", n, calls.Load())
		}
		t.Logf("%d calls, %d SCRIPT FLUSH rounds", calls.Load(), flushes.Load())
	})
}
