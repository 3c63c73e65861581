package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The Sentinel fails its primary over to the replica while a Limiter decides
// through a store over it, once for each way to build the store. The old
// primary accepts writes until Sentinel demotes it, seconds later, and then
// discards them: a decision written there is lost. So once the sentinel
// names the new primary, decisions must reach it (within the bound the
// package doc gives), carrying the state the old one had. Calls in flight
// at the switch may fail; their outcome is the failure policy's.
func TestSentinelFailover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) *Store
		grace time.Duration // how soon after the switch decisions must reach the new primary
	}{
		{"NewFailover", func(t *testing.T) *Store {
			return NewFailover(&goredis.FailoverOptions{
				MasterName:    testenv.SentinelFailoverMaster,
				SentinelAddrs: []string{testenv.RedisSentinelAddr(t)},
			}, nil)
		}, 500 * time.Millisecond},
		{"New with a failover client", func(t *testing.T) *Store {
			return New(userFailover(t, testenv.SentinelFailoverMaster), nil)
		}, failoverConnLifetime + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store(t)
			t.Cleanup(func() { _ = s.Close() })
			failOver(t, s, tc.grace)
		})
	}
}

func failOver(t *testing.T, s *Store, grace time.Duration) {
	ctx := context.Background()
	sentinel := goredis.NewSentinelClient(&goredis.Options{Addr: testenv.RedisSentinelAddr(t)})
	t.Cleanup(func() { _ = sentinel.Close() })
	primary := func() string {
		a, err := sentinel.GetMasterAddrByName(ctx, testenv.SentinelFailoverMaster).Result()
		if err != nil || len(a) != 2 {
			t.Fatalf("the sentinel's primary: %v, %v", a, err)
		}
		return a[0] + ":" + a[1]
	}
	// The sentinel promotes only a replica it sees in sync; after an earlier
	// failover it learns the old primary's new role late (Sentinel demotes
	// it after some seconds, and reads INFO every 10s).
	for start := time.Now(); !replicaReady(ctx, sentinel); {
		if time.Since(start) > 60*time.Second {
			t.Fatal("the sentinel saw no in-sync replica within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := primary()
	old := goredis.NewClient(&goredis.Options{Addr: before})
	t.Cleanup(func() { _ = old.Close() })

	// A rate so slow that nothing refills during the test: Remaining counts
	// the units admitted.
	p := core.Policy{Name: "failover", Limit: 1000, Window: core.MaxWindow}
	l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: s, Prefix: "sluice-test"})
	if err != nil {
		t.Fatal(err)
	}
	id := testKey(t, userFailover(t, testenv.SentinelFailoverMaster)).Identity
	key := l.Key(id).String()
	const admitted = 100
	for i := range admitted {
		if d, err := l.Allow(ctx, id); err != nil || !d.Allowed {
			t.Fatalf("decision %d before the failover: %+v, %v", i, d, err)
		}
	}
	// The replica holds the state before the switch (replication is
	// asynchronous: without this the switch could lose it, as Redis may).
	// WAIT counts the writes of its own connection, so it follows a write
	// of this connection: the replication stream is in order, so once the
	// replica has that write it has the decisions made before it.
	marker := key + ":replicated"
	if err := old.Set(ctx, marker, "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := old.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	if err := sentinel.Failover(ctx, testenv.SentinelFailoverMaster).Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}

	// Decide every 20ms until the sentinel names the new primary.
	var after string
	var failed int
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if after = primary(); after != before {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("30s after SENTINEL FAILOVER the primary is still %s", before)
		}
		if _, err := l.Allow(ctx, id); err != nil {
			failed++
		}
	}
	switched := time.Now()
	neu := goredis.NewClient(&goredis.Options{Addr: after})
	t.Cleanup(func() { _ = neu.Close() })
	reached := func() bool {
		was, _ := neu.Get(ctx, key).Result()
		d, err := l.Allow(ctx, id)
		if err != nil {
			failed++
			return false
		}
		now, _ := neu.Get(ctx, key).Result()
		if now == was {
			return false
		}
		// The state moved: the units admitted before the switch still
		// count. (A fresh key would leave about 999.)
		if want := p.Limit - admitted - 1; d.Remaining > want {
			t.Fatalf("on the new primary Remaining = %d, want at most %d: the state did not move with the primary", d.Remaining, want)
		}
		return true
	}
	for !reached() {
		if time.Since(switched) > grace {
			t.Fatalf("%v after the sentinel named %s (was %s), decisions still do not reach it (%d calls failed)", grace, after, before, failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("primary %s -> %s; decisions reach it %v after the sentinel named it; %d calls failed", before, after, time.Since(switched).Round(time.Millisecond), failed)
	for i := range 20 {
		if !reached() {
			t.Fatalf("decision %d after reaching the new primary %s went elsewhere or failed", i, after)
		}
	}
}

// replicaReady reports whether the sentinel sees a replica of its primary
// that is up and in sync: one it would promote.
func replicaReady(ctx context.Context, sentinel *goredis.SentinelClient) bool {
	rs, err := sentinel.Replicas(ctx, testenv.SentinelFailoverMaster).Result()
	if err != nil {
		return false
	}
	for _, r := range rs {
		if r["flags"] == "slave" && r["master-link-status"] == "ok" {
			return true
		}
	}
	return false
}
