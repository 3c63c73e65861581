package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// clusterNode is one master of a private test cluster, reached directly.
type clusterNode struct {
	c    *goredis.Client
	id   string
	host string
	port int
}

func clusterNodes(t *testing.T, admin *goredis.ClusterClient) []*clusterNode {
	t.Helper()
	var mu sync.Mutex
	var nodes []*clusterNode
	err := admin.ForEachMaster(ctxT(t), func(ctx context.Context, c *goredis.Client) error {
		id, err := c.Do(ctx, "cluster", "myid").Text()
		if err != nil {
			return err
		}
		host, port, _ := strings.Cut(c.Options().Addr, ":")
		p, err := strconv.Atoi(port)
		if err != nil {
			return err
		}
		mu.Lock()
		nodes = append(nodes, &clusterNode{c: c, id: id, host: host, port: p})
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// slotOwner is the address of the master that serves slot in c's view.
func slotOwner(ctx context.Context, c goredis.UniversalClient, slot int) (string, error) {
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					return fmt.Sprintf("%s:%d", n.IP, n.Port), nil
				}
			}
		}
	}
	return "", fmt.Errorf("no master serves slot %d", slot)
}

// owner returns the master that serves slot.
func owner(t *testing.T, admin *goredis.ClusterClient, nodes []*clusterNode, slot int) *clusterNode {
	t.Helper()
	addr, err := slotOwner(ctxT(t), admin, slot)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.c.Options().Addr == addr {
			return n
		}
	}
	t.Fatalf("slot %d is served by %s, which is no master of the cluster", slot, addr)
	return nil
}

// setSlot runs CLUSTER SETSLOT slot args... on n.
func setSlot(t *testing.T, n *clusterNode, slot int, args ...any) {
	t.Helper()
	if err := n.c.Do(ctxT(t), append([]any{"cluster", "setslot", slot}, args...)...).Err(); err != nil {
		t.Fatalf("CLUSTER SETSLOT %d %v on %s: %v", slot, args, n.c.Options().Addr, err)
	}
}

// migrateKeys moves every key of slot from src to dst, which must be
// importing it.
func migrateKeys(t *testing.T, src, dst *clusterNode, slot int) {
	t.Helper()
	keys, err := src.c.ClusterGetKeysInSlot(ctxT(t), slot, 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		return
	}
	args := []any{"migrate", dst.host, dst.port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := src.c.Do(ctxT(t), args...).Err(); err != nil {
		t.Fatalf("MIGRATE slot %d from %s: %v", slot, src.c.Options().Addr, err)
	}
}

// assignSlot ends a migration of slot from src to dst: every master is
// told, the new owner first, and the call waits until they all agree.
func assignSlot(t *testing.T, nodes []*clusterNode, src, dst *clusterNode, slot int) {
	t.Helper()
	setSlot(t, dst, slot, "node", dst.id)
	setSlot(t, src, slot, "node", dst.id)
	for _, n := range nodes {
		if n != src && n != dst {
			setSlot(t, n, slot, "node", dst.id)
		}
	}
	// A master can miss the change on a loaded machine (a gossip message
	// from before it, with a stale epoch, wins), even after it agreed once:
	// tell each master that still disagrees again, every few polls, as
	// Redis's own cluster tests do, until all have agreed for five polls
	// in a row (100 ms). A master that took the slot back after the test
	// went on would send the stores to the old owner, whose copy of the
	// key is gone, and the test would blame them for the cluster's split.
	polls, agreed := 0, 0
	waitFor(t, "the masters to agree on the slot's new owner", func() bool {
		polls++
		agree := true
		for _, n := range nodes {
			if addr, err := slotOwner(ctxT(t), n.c, slot); err != nil || addr != dst.c.Options().Addr {
				agree = false
				if polls%10 == 0 {
					_ = n.c.Do(ctxT(t), "cluster", "setslot", slot, "node", dst.id).Err()
				}
			}
		}
		if !agree {
			agreed = 0
			return false
		}
		agreed++
		return agreed == 5
	})
}

// errorstat reads how many error replies starting with code n has sent.
func errorstat(t *testing.T, n *clusterNode, code string) int64 {
	t.Helper()
	info, err := n.c.Info(ctxT(t), "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "errorstat_"+code+":count="); ok {
			x, _ := strconv.ParseInt(v, 10, 64)
			return x
		}
	}
	return 0
}

// appendByte is a Mutation that appends '+' to the state.
type appendByte struct{}

func (appendByte) Apply(state []byte) ([]byte, time.Duration) {
	return append(state, '+'), time.Hour
}

// TestClusterRedirects migrates a key's slot to another master of a private
// cluster under stores whose slot maps are stale. During the migration,
// with the key already moved, the old owner answers ASK; after it, MOVED.
// The stores follow both themselves (the replies prove the command did not
// run), on the script path and the generic path, and every decision
// continues the same state.
func TestClusterRedirects(t *testing.T) {
	addrs := startCluster(t, 3)
	newUser := func() *goredis.ClusterClient {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	admin := newUser()
	nodes := clusterNodes(t, admin)
	for _, opts := range []*Options{nil, {NoBatch: true}} {
		name := "batched"
		if opts != nil {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			scripts := New(newUser(), opts) // the script path
			generic := New(newUser(), opts) // the generic path, on a key of its own
			t.Cleanup(func() { _ = scripts.Close(); _ = generic.Close() })
			key := testKey(t, admin)
			// A second key in the same slot: the same hash tag.
			gkey := store.Key{Namespace: key.Namespace + ":generic", Identity: key.Identity}
			t.Cleanup(func() { admin.Del(context.Background(), gkey.String()) })

			slot, src, dst := slotMove(t, admin, nodes, key.String())

			p := core.Policy{Name: "redirect", Limit: 10, Window: time.Hour}
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
			alg := algorithm.GCRA{}
			var state []byte
			decide := func(step string) {
				t.Helper()
				next, _, want := alg.Step(state, now, 1, &p)
				if next != nil {
					state = next
				}
				r, err := scripts.RunScript(ctxT(t), alg.Script(), key, core.NewScriptArgs(&p, now, 1))
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if got := core.ScriptDecision(r); got != want {
					t.Fatalf("%s:\n got  %+v\n want %+v", step, got, want)
				}
			}
			update := func(step string) {
				t.Helper()
				before, err := admin.Get(ctxT(t), gkey.String()).Result()
				if err != nil && err != goredis.Nil {
					t.Fatal(err)
				}
				if err := generic.Update(ctxT(t), gkey, appendByte{}); err != nil {
					t.Fatalf("%s: Update: %v", step, err)
				}
				if after, err := admin.Get(ctxT(t), gkey.String()).Result(); err != nil || after != before+"+" {
					t.Fatalf("%s: the key holds %q (%v), want %q", step, after, err, before+"+")
				}
			}
			decide("before the migration")
			decide("before the migration, again")
			update("before the migration")
			update("before the migration, again")

			asks, moves := errorstat(t, src, "ASK"), errorstat(t, src, "MOVED")
			setSlot(t, dst, slot, "importing", src.id)
			setSlot(t, src, slot, "migrating", dst.id)
			migrateKeys(t, src, dst, slot)
			decide("during the migration")
			update("during the migration")
			if errorstat(t, src, "ASK") == asks {
				t.Fatal("the migrating node sent no ASK: the test proved nothing")
			}

			assignSlot(t, nodes, src, dst, slot)
			decide("after the migration")
			update("after the migration")
			if errorstat(t, src, "MOVED") == moves {
				t.Fatal("the old owner sent no MOVED: the test proved nothing")
			}
			decide("after the migration, again")
			update("after the migration, again")
		})
	}
}

// TestClusterRedirectToANewMaster: a master just added to the cluster owns
// no slot, so it is in no slot map, yet the first slot moved to it sends
// ASK (and, once moved, MOVED) replies that name it. The store follows
// them there too, on the script path and the generic path. It looked the
// node up in the slot map only, and failed every call on the moving slot
// for the whole move ("ASK … not in the cluster's slot map").
func TestClusterRedirectToANewMaster(t *testing.T) {
	addrs := startClusterSpare(t, 2, 1)
	admin := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs[:2]})
	t.Cleanup(func() { _ = admin.Close() })
	nodes := clusterNodes(t, admin) // the two with slots
	spareC := goredis.NewClient(&goredis.Options{Addr: addrs[2]})
	t.Cleanup(func() { _ = spareC.Close() })
	spareID, err := spareC.Do(ctxT(t), "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(addrs[2], ":")
	p, _ := strconv.Atoi(port)
	spare := &clusterNode{c: spareC, id: spareID, host: host, port: p}

	user := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs[:2]})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	t.Cleanup(func() { _ = s.Close() })
	key := testKey(t, admin)
	gkey := store.Key{Namespace: key.Namespace + ":generic", Identity: key.Identity}
	slot, src, _ := slotMove(t, admin, nodes, key.String()) // to the spare, not another master
	pol := core.Policy{Name: "redirect", Limit: 10, Window: time.Hour}
	decide := func(step string) {
		t.Helper()
		if _, err := s.RunScript(ctxT(t), algorithm.GCRA{}.Script(), key, core.NewScriptArgs(&pol, 0, 1)); err != nil {
			t.Fatalf("%s: script: %v", step, err)
		}
		if err := s.Update(ctxT(t), gkey, appendByte{}); err != nil {
			t.Fatalf("%s: Update: %v", step, err)
		}
	}
	decide("before the move")
	setSlot(t, spare, slot, "importing", src.id)
	setSlot(t, src, slot, "migrating", spare.id)
	migrateKeys(t, src, spare, slot)
	decide("during the move, the keys on the new master") // ASK
	for _, n := range append(nodes, spare) {
		setSlot(t, n, slot, "node", spare.id)
	}
	decide("after the move") // MOVED, until the map has it
	if n, err := spareC.Exists(ctxT(t), key.String(), gkey.String()).Result(); err != nil || n != 2 {
		t.Fatalf("the new master holds %d of the two keys (%v)", n, err)
	}
}

// migratingCluster starts a private cluster of two masters and returns an
// admin client, a store over it, and its masters.
func migratingCluster(t *testing.T) (*goredis.ClusterClient, *Store, []*clusterNode) {
	t.Helper()
	addrs := startCluster(t, 2)
	admin := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = admin.Close() })
	s := New(admin, nil)
	t.Cleanup(func() { _ = s.Close() })
	return admin, s, clusterNodes(t, admin)
}

// slotMove returns key's slot, the master that serves it, and another
// master to move it to.
func slotMove(t *testing.T, admin *goredis.ClusterClient, nodes []*clusterNode, key string) (slot int, src, dst *clusterNode) {
	t.Helper()
	slot64, err := admin.ClusterKeySlot(ctxT(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	slot = int(slot64)
	src = owner(t, admin, nodes, slot)
	dst = nodes[0]
	if dst == src {
		dst = nodes[1]
	}
	return slot, src, dst
}

// startMigrating sets key's slot migrating from its master to the other
// one, moving no key, and returns the master it leaves.
func startMigrating(t *testing.T, admin *goredis.ClusterClient, nodes []*clusterNode, key string) *clusterNode {
	t.Helper()
	slot, src, dst := slotMove(t, admin, nodes, key)
	setSlot(t, dst, slot, "importing", src.id)
	setSlot(t, src, slot, "migrating", dst.id)
	return src
}

// TestClusterReleaseWhileMigrating: releasing an identity's only lease
// while its slot is migrating empties the lease set, which deletes its
// key, and a script may not touch a key of a migrating slot that is not
// there ("Script attempted to access a non local key"): the release script
// must not touch its key after the lease it removes was the last, or the
// release, done, reads as an unknown outcome.
func TestClusterReleaseWhileMigrating(t *testing.T) {
	admin, s, nodes := migratingCluster(t)
	l, err := core.New(core.Config{Policy: core.Policy{Name: "leases", Limit: 2, Window: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	lease, d, err := l.Acquire(ctxT(t), "id")
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire: %+v %v", d, err)
	}
	src := startMigrating(t, admin, nodes, l.Key("id").String())
	if err := lease.Release(ctxT(t)); err != nil {
		t.Fatalf("releasing the only lease while the slot migrates: %v", err)
	}
	// The old owner answers ASK for a key of a migrating slot it does not
	// hold.
	if n, err := src.c.Exists(ctxT(t), l.Key("id").String()).Result(); n != 0 || (err != nil && !strings.HasPrefix(err.Error(), "ASK ")) {
		t.Fatalf("the lease set is still there (%d, %v)", n, err)
	}
}

// TestClusterSlidingLogWhileMigrating: a sliding log whose every entry has
// left the window drops them when it admits; dropped before the new entry
// went in, they emptied the set, which deletes its key, and the entry that
// followed touched a key not there in a migrating slot ("Script attempted
// to access a non local key"): an unknown outcome, and in a Multi, its
// other limits charged while this one was not. The new entry now goes in
// first. (The key outlives its entries here because the window shrank
// under the limit's name, as a Multi's limits, given per call, may.)
func TestClusterSlidingLogWhileMigrating(t *testing.T) {
	admin, s, nodes := migratingCluster(t)
	logOf := func(w time.Duration) core.Limit {
		return core.Limit{Policy: core.Policy{Name: "log", Limit: 5, Window: w}, Algorithm: algorithm.SlidingLog{}}
	}
	hour := core.Limit{Policy: core.Policy{Name: "hour", Limit: 100, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}}
	m, err := core.NewMulti(core.MultiConfig{Name: "both", Store: s})
	if err != nil {
		t.Fatal(err)
	}
	single := func(w time.Duration) *core.Limiter {
		l, err := core.New(core.Config{Policy: logOf(w).Policy, Algorithm: algorithm.SlidingLog{}, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if d, err := single(10*time.Second).Allow(ctxT(t), "id"); err != nil || !d.Allowed {
		t.Fatalf("single: %+v %v", d, err)
	}
	if d, _, err := m.Allow(ctxT(t), "id", core.MustLimits(hour, logOf(10*time.Second)), nil); err != nil || !d.Allowed {
		t.Fatalf("multi: %+v %v", d, err)
	}
	// Every key shares the identity's slot.
	startMigrating(t, admin, nodes, single(time.Second).Key("id").String())
	time.Sleep(150 * time.Millisecond) // every entry leaves a window of 100 ms
	if d, err := single(100*time.Millisecond).Allow(ctxT(t), "id"); err != nil || !d.Allowed {
		t.Fatalf("single, its entries out of the window, the slot migrating: %+v %v", d, err)
	}
	d, states, err := m.Allow(ctxT(t), "id", core.MustLimits(hour, logOf(100*time.Millisecond)), nil)
	if err != nil || !d.Allowed {
		t.Fatalf("multi, its log's entries out of the window, the slot migrating: %+v %v", d, err)
	}
	if states[0].Remaining != 98 || states[1].Remaining != 4 {
		t.Fatalf("multi: remaining %d (hour) and %d (log); want 98 and 4", states[0].Remaining, states[1].Remaining)
	}
}
