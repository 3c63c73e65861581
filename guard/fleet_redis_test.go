package guard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testenv"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// TestFleetOfManyStartedAtOnce: hundreds of instances that start within
// a moment (a rollout) are counted right within a few heartbeats, over
// Redis. Each heartbeat was a compare-and-swap of one shared key: beats
// that overlapped lost to one another and retried past their Timeout, and
// instances kept a count far below the fleet's (down to 1, which sizes a
// fallback to the whole limit), for as long as their beats stayed
// clustered. On a store that runs scripts a heartbeat is now one script,
// which cannot lose a race, and the instances' beats spread out.
func TestFleetOfManyStartedAtOnce(t *testing.T) {
	const n = 600
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t), PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	s := sredis.New(c, nil)
	t.Cleanup(func() { s.Close() })
	name := fmt.Sprintf("many-%d", time.Now().UnixNano())
	interval := 200 * time.Millisecond
	fleets := make([]*guard.Fleet, n)
	var wg sync.WaitGroup
	for i := range fleets {
		wg.Go(func() {
			f, err := guard.NewFleet(&guard.FleetOptions{Store: s, Name: name, Interval: interval})
			if err != nil {
				t.Error(err)
				return
			}
			fleets[i] = f
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Cleanup(func() {
		for _, f := range fleets {
			f.Close()
		}
		keys, _ := c.Keys(context.Background(), "sluice:"+name+":*").Result()
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	// Every instance beats at least twice within 4 intervals.
	time.Sleep(4 * interval)
	low, sizes := n, map[int]int{}
	for _, f := range fleets {
		low = min(low, f.Size())
		sizes[f.Size()]++
	}
	if low != n {
		t.Fatalf("after 4 heartbeats' time, the lowest count of %d instances is %d (counts: %v)", n, low, sizes)
	}
}

// The scripted heartbeat counts as the compare-and-swap one does, on a
// single server and on the cluster: instances are counted, one that stops
// beating drops out after Expiry, MaxInstances keeps the most recent, and
// a key of another type under the heartbeats' name is replaced.
func TestFleetScriptedHeartbeat(t *testing.T) {
	for name, client := range map[string]func(testing.TB) goredis.UniversalClient{
		"server": func(t testing.TB) goredis.UniversalClient {
			return goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
		},
		"cluster": func(t testing.TB) goredis.UniversalClient {
			return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t)})
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			t.Cleanup(func() { c.Close() })
			s := sredis.New(c, nil)
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			fleet := fmt.Sprintf("scripted-%d", time.Now().UnixNano())
			o := &guard.FleetOptions{Store: s, Name: fleet, Interval: 20 * time.Millisecond}
			a, b, cc := newFleet(t, o), newFleet(t, o), newFleet(t, o)
			waitSize(t, a, 3)
			waitSize(t, b, 3)
			if err := cc.Close(); err != nil {
				t.Fatal(err)
			}
			waitSize(t, a, 2) // cc's heartbeat expires after 3 intervals
			waitSize(t, b, 2)

			capped := &guard.FleetOptions{Store: s, Name: fleet + "-capped", MaxInstances: 3, Interval: time.Hour}
			var fs []*guard.Fleet
			for range 5 {
				fs = append(fs, newFleet(t, capped))
			}
			for _, f := range fs {
				if err := f.Beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := fs[4].Size(); got != 3 {
				t.Fatalf("size %d with MaxInstances 3 and 5 instances, want 3", got)
			}

			// A hash where the heartbeats' set goes: replaced, and counted
			// from there.
			foreign := &guard.FleetOptions{Store: s, Name: fleet + "-foreign", Interval: time.Hour}
			f := newFleet(t, foreign)
			keys, err := keysOf(ctx, c, "*"+fleet+"-foreign*")
			if err != nil || len(keys) != 1 {
				t.Fatalf("the heartbeats' keys: %v %v; want one", keys, err)
			}
			c.Del(ctx, keys[0])
			c.HSet(ctx, keys[0], "f", "v")
			if err := f.Beat(ctx); err != nil || f.Size() != 1 {
				t.Fatalf("a beat over a hash: %v, size %d; want 1", err, f.Size())
			}
			g := newFleet(t, foreign)
			if err := f.Beat(ctx); err != nil || f.Size() != 2 || g.Size() != 2 {
				t.Fatalf("after a second instance: %v, sizes %d, %d; want 2", err, f.Size(), g.Size())
			}
			for _, k := range []string{fleet, fleet + "-capped", fleet + "-foreign"} {
				keys, _ := keysOf(ctx, c, "*"+k+":*")
				for _, key := range keys {
					c.Del(ctx, key)
				}
			}
		})
	}
}

// keysOf is KEYS pattern on c's server, or on every master of a cluster.
func keysOf(ctx context.Context, c goredis.UniversalClient, pattern string) ([]string, error) {
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		return c.Keys(ctx, pattern).Result()
	}
	var mu sync.Mutex
	var keys []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
		ks, err := n.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	return keys, err
}
