package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// noScripts sums the NOSCRIPT replies the servers have sent (INFO
// errorstats) over every master of c.
func noScripts(t *testing.T, c goredis.UniversalClient) int64 {
	t.Helper()
	var total atomic.Int64
	read := func(ctx context.Context, n *goredis.Client) error {
		info, err := n.Info(ctx, "errorstats").Result()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "errorstat_NOSCRIPT:count="); ok {
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("errorstats line %q: %w", line, err)
				}
				total.Add(x)
			}
		}
		return nil
	}
	var err error
	switch c := c.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctxT(t), read)
	case *goredis.Client:
		err = read(ctxT(t), c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return total.Load()
}

func flushScripts(ctx context.Context, c goredis.UniversalClient) error {
	if cc, ok := c.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
			return n.ScriptFlush(ctx).Err()
		})
	}
	return c.ScriptFlush(ctx).Err()
}

// TestScriptFlushUnderLoad flushes the script cache again and again while
// goroutines make decisions: the store answers NOSCRIPT with EVAL, so no
// error reaches a caller.
func TestScriptFlushUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(testing.TB, *Options) *Store
		admin func(testing.TB) goredis.UniversalClient
	}{
		{"single", newStore, func(t testing.TB) goredis.UniversalClient { return userClient(t) }},
		{"cluster", newClusterStore, func(t testing.TB) goredis.UniversalClient { return userCluster(t) }},
	} {
		for _, opts := range []*Options{nil, {NoBatch: true}} {
			name := tc.name + "/batched"
			if opts != nil {
				name = tc.name + "/direct"
			}
			t.Run(name, func(t *testing.T) {
				admin := tc.admin(t)
				s := tc.store(t, opts)
				algs := []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.FixedWindow{}, algorithm.SlidingLog{}}
				keys := make([]store.Key, 16)
				for i := range keys {
					keys[i] = testKey(t, admin)
				}
				p := core.Policy{Name: "flush", Limit: 1000, Window: time.Second}
				before := noScripts(t, admin)

				// Two more workers take the generic path, whose
				// compare-and-set is a script too; each has an identity of
				// its own, so that nothing contends.
				generic, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: s, NoScript: true, Prefix: "sluice-test", Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}

				const flushes, minCalls, maxCalls = 20, 100, 5000
				var flushed atomic.Bool
				var wg sync.WaitGroup
				for w := range 2 {
					id := fmt.Sprintf("flush-generic-%d-%d", w, time.Now().UnixNano())
					t.Cleanup(func() { admin.Del(context.Background(), generic.Key(id).String()) })
					wg.Go(func() {
						for i := 0; i < maxCalls && (i < minCalls || !flushed.Load()); i++ {
							if _, err := generic.Allow(context.Background(), id); err != nil {
								t.Errorf("generic worker %d call %d: %v", w, i, err)
								return
							}
						}
					})
				}
				for w := range 8 {
					wg.Go(func() {
						for i := 0; i < maxCalls && (i < minCalls || !flushed.Load()); i++ {
							alg := algs[(w+i)%len(algs)].(core.Scripted)
							_, err := s.RunScript(ctxT(t), alg.Script(), keys[(w*7+i)%len(keys)], core.NewScriptArgs(&p, 0, 1))
							if err != nil {
								t.Errorf("worker %d call %d: %v", w, i, err)
								return
							}
						}
					})
				}
				for range flushes {
					if err := flushScripts(ctxT(t), admin); err != nil {
						t.Errorf("SCRIPT FLUSH: %v", err)
					}
					time.Sleep(2 * time.Millisecond)
				}
				flushed.Store(true)
				wg.Wait()
				if n := noScripts(t, admin) - before; n == 0 {
					t.Fatal("the servers sent no NOSCRIPT: the test proved nothing")
				} else {
					t.Logf("%d NOSCRIPT replies, none reached a caller", n)
				}
			})
		}
	}
}
