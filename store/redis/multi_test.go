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
)

// threeLimits is "10 per second, burst 20; 1,000 per minute; 10,000 per
// day in Berlin": the set the issue names.
func threeLimits(t testing.TB) *core.Limits {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("time.LoadLocation: %v", err)
	}
	return core.MustLimits(
		core.Limit{Policy: core.Policy{Name: "second", Limit: 10, Window: time.Second, Burst: 20}, Algorithm: algorithm.GCRA{}},
		core.Limit{Policy: core.PerMinute("minute", 1000), Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "day", Limit: 10_000, Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day, Location: berlin}},
	)
}

// commandCalls sums "calls" of each command in INFO commandstats over every
// master of the cluster.
func commandCalls(t *testing.T, c *goredis.ClusterClient, cmds ...string) map[string]int64 {
	t.Helper()
	calls := map[string]int64{}
	perNode := map[string]map[string]int64{}
	var mu sync.Mutex // ForEachMaster calls fn on each master concurrently
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, n *goredis.Client) error {
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		m := map[string]int64{}
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range cmds {
				prefix := "cmdstat_" + cmd + ":calls="
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
					v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
					m[cmd] = v
				}
			}
		}
		mu.Lock()
		perNode[n.Options().Addr] = m
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for _, m := range perNode {
		for cmd, v := range m {
			calls[cmd] += v
		}
	}
	return calls
}

// TestMultiIsOneEvalshaOnCluster counts on the servers of a real 3-master
// cluster: each decision of three limits is one EVALSHA, on one master
// (the identity's slot), with no EVAL and no other command sent by the
// client. The counts are the servers' own, which tests of other packages
// running at the same time can only raise: a run of 30 decisions that
// counted exactly 30 EVALSHA proves it, and a run that counts more is
// tried again (three runs at most); fewer than 30 fails at once.
func TestMultiIsOneEvalshaOnCluster(t *testing.T) {
	s := newClusterStore(t, nil)
	m, err := core.NewMulti(core.MultiConfig{Name: "count", Store: s, Prefix: "sluice-test"})
	if err != nil {
		t.Fatal(err)
	}
	ls := threeLimits(t)
	cluster := userCluster(t)
	const decisions = 30
	var evalsha int64
	for attempt := 0; attempt < 3; attempt++ {
		id := fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
		// The first decision may load the script (NOSCRIPT, then EVAL).
		if _, _, err := m.Allow(ctxT(t), id, ls, nil); err != nil {
			t.Fatal(err)
		}
		before := commandCalls(t, cluster, "evalsha", "eval", "get", "set")
		admitted := 0
		var buf [3]core.LimitState
		for range decisions {
			d, states, err := m.Allow(ctxT(t), id, ls, buf[:0])
			if err != nil {
				t.Fatal(err)
			}
			if len(states) != 3 {
				t.Fatalf("%d limit states, want 3", len(states))
			}
			if d.Allowed {
				admitted++
			}
		}
		after := commandCalls(t, cluster, "evalsha", "eval", "get", "set")
		if admitted == 0 || admitted == decisions {
			t.Fatalf("%d of %d admitted: the run should meet the burst of 20 (20 of the first 31)", admitted, decisions)
		}
		evalsha = after["evalsha"] - before["evalsha"]
		if evalsha < decisions {
			t.Fatalf("%d decisions of three limits ran %d EVALSHA on the cluster, want exactly %d", decisions, evalsha, decisions)
		}
		if evalsha == decisions && after["eval"] == before["eval"] {
			return
		}
		t.Logf("run %d: %d EVALSHA and %d EVAL counted (other tests share the cluster); again", attempt+1, evalsha, after["eval"]-before["eval"])
	}
	t.Errorf("%d decisions of three limits: every run counted more than %d EVALSHA or some EVAL (last: %d EVALSHA)", decisions, decisions, evalsha)
}

// BenchmarkMultiVsSingle: a decision of three limits (GCRA, a fixed window,
// a calendar day) against one of a single GCRA limit, both through core
// over one store, measured alternately in one loop so that both see the
// same machine; and a Multi of that one GCRA limit alone. Reports each
// one's µs and the ratios multi/single and multi3/multi1.
func BenchmarkMultiVsSingle(b *testing.B) {
	s := newStore(b, &Options{NoBatch: true})
	single, err := core.New(core.Config{Policy: core.Policy{Name: "single", Limit: 1_000_000_000, Window: time.Hour}, Algorithm: algorithm.GCRA{}, Store: s, Prefix: "sluice-bench"})
	if err != nil {
		b.Fatal(err)
	}
	m, err := core.NewMulti(core.MultiConfig{Name: "bench", Store: s, Prefix: "sluice-bench"})
	if err != nil {
		b.Fatal(err)
	}
	big := core.MustLimits(
		core.Limit{Policy: core.Policy{Name: "second", Limit: 1_000_000_000, Window: time.Hour}, Algorithm: algorithm.GCRA{}},
		core.Limit{Policy: core.Policy{Name: "minute", Limit: 1_000_000_000, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "day", Limit: 1_000_000_000, Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day, Location: time.UTC}},
	)
	one := core.MustLimits(big.Limit(0))
	id := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	ctx := context.Background()
	var buf [3]core.LimitState
	var ts, tm, t1m time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if _, err := single.Allow(ctx, id); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := m.Allow(ctx, id, big, buf[:0]); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, _, err := m.Allow(ctx, id, one, buf[:0]); err != nil {
			b.Fatal(err)
		}
		ts += t1.Sub(t0)
		tm += t2.Sub(t1)
		t1m += time.Since(t2)
	}
	b.ReportMetric(float64(ts.Microseconds())/float64(b.N), "single-µs")
	b.ReportMetric(float64(tm.Microseconds())/float64(b.N), "multi3-µs")
	b.ReportMetric(float64(t1m.Microseconds())/float64(b.N), "multi1-µs")
	b.ReportMetric(float64(tm)/float64(ts), "multi/single")
	b.ReportMetric(float64(tm)/float64(t1m), "multi3/multi1")
}

// Reset deletes every limit's key of the multi-limit script.
func TestMultiResetDeletesEveryLimitsKey(t *testing.T) {
	ctx := ctxT(t)
	c := userClient(t)
	s := newStore(t, nil)
	prefix := fmt.Sprintf("sluice-test-reset-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if keys, _ := c.Keys(context.Background(), prefix+":*").Result(); len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	m, err := core.NewMulti(core.MultiConfig{Name: "mr", Store: s, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ls := threeLimits(t)
	if d, _, err := m.Allow(ctx, "tenant", ls, nil); err != nil || !d.Allowed {
		t.Fatalf("%+v, %v; want admitted", d, err)
	}
	keys, err := c.Keys(ctx, prefix+":*").Result()
	if err != nil || len(keys) != ls.Len() {
		t.Fatalf("after a decision: keys %v (%v); want one per limit", keys, err)
	}
	if err := m.Reset(ctx, "tenant", ls); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if keys, err := c.Keys(ctx, prefix+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("after Reset: keys %v (%v); want none", keys, err)
	}
}
