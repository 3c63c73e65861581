package bench

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/bench/internal/stat"
	"github.com/sluicehq/sluice/core"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// What one decision costs the server, and what one key costs its memory:
// the two figures that bound a Redis shard, whatever the client does. One
// Redis core runs every script of its shard, so server µs per decision is
// the shard's capacity; used_memory per key is what a fleet's identities
// cost.

// footprintDB is the logical database the footprint figures use, emptied
// before and after each contender so that used_memory counts its keys only.
// No other test or benchmark uses it.
const footprintDB = 15

// O1Algorithms are the algorithms whose Redis state is one small string,
// whatever the limit: the ones the README's per-key figure is for.
var o1Algorithms = []core.Algorithm{
	algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.FixedWindow{}, algorithm.LeakyBucket{}, algorithm.SlidingCounter{},
}

// footprintContender is one way to decide on a key of a go-redis client.
type footprintContender struct {
	name  string
	setup func(tb testing.TB, c *goredis.Client, m matrixMode) decide
}

// footprintContenders are Sluice over store/redis, one per O(1) algorithm
// (sluice-<algorithm>), and the Redis peers of the matrix.
func footprintContenders() []footprintContender {
	var cs []footprintContender
	for _, alg := range o1Algorithms {
		cs = append(cs, footprintContender{"sluice-" + alg.Name(), func(tb testing.TB, c *goredis.Client, m matrixMode) decide {
			s := sredis.New(c, nil)
			tb.Cleanup(func() { s.Close() })
			l, err := core.New(core.Config{Policy: core.Policy{Name: "m", Limit: m.limit(), Window: time.Hour}, Algorithm: alg, Store: s, Timeout: time.Second})
			if err != nil {
				tb.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				d, err := l.Allow(ctx, key)
				return d.Allowed, err
			}
		}})
	}
	return append(cs,
		footprintContender{"redis_rate", redisRateDecide},
		footprintContender{"ulule", ululeRedisDecide},
		footprintContender{"lean-go-redis", leanGoRedisDecide},
	)
}

func footprintClient(tb testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, DB: footprintDB})
	tb.Cleanup(func() { c.Close() })
	return c
}

// info returns the fields of one INFO section.
func info(tb testing.TB, c *goredis.Client, section string) map[string]string {
	tb.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

func usedMemory(tb testing.TB, c *goredis.Client) int64 {
	tb.Helper()
	n, err := strconv.ParseInt(info(tb, c, "memory")["used_memory"], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// bytesPerKey writes keys distinct identities through step, each with a
// state that lives an hour (one unit an hour: the first decision admits and
// writes), and returns the growth of used_memory per key. It checks that
// every key is there: a contender that writes fewer keys than decisions
// would look cheaper than it is.
func bytesPerKey(tb testing.TB, c *goredis.Client, step decide, keys int) float64 {
	tb.Helper()
	ctx := context.Background()
	tb.Cleanup(func() { c.FlushDB(context.Background()) })
	// A first round on identities of its own opens the contender's
	// connections (each has buffers on the server), then goes.
	decideAll(tb, step, identities(tb, 4*matrixWorkers))
	if err := c.FlushDB(ctx).Err(); err != nil {
		tb.Fatal(err)
	}
	ids := identities(tb, keys)
	before := usedMemory(tb, c)
	decideAll(tb, step, ids)
	after := usedMemory(tb, c)
	if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(keys) {
		tb.Fatalf("%d keys in the database after %d first decisions (%v)", n, keys, err)
	}
	return float64(after-before) / float64(keys)
}

// matrixWorkers is how many goroutines decideAll decides from.
const matrixWorkers = 64

// decideAll makes one decision for each of ids, from matrixWorkers
// goroutines, and fails unless each admits.
func decideAll(tb testing.TB, step decide, ids []string) {
	tb.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, matrixWorkers)
	for w := range matrixWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ids); i += matrixWorkers {
				if ok, err := step(ctx, ids[i]); err != nil || !ok {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatalf("a first decision failed or refused: %v", err)
	}
}

// redisBytesPerKeyBound is what the README promises Sluice's O(1)
// algorithms cost Redis per key, over 100k keys.
const redisBytesPerKeyBound = 134

// TestRedisBytesPerKey holds the README's memory figure: over 100,000 keys,
// each O(1) algorithm's state costs redis-server at most
// redisBytesPerKeyBound bytes of used_memory per key. The peers' figures
// are logged beside it. used_memory counts the allocator's bytes, not the
// process's pages, so the figure does not depend on timing.
func TestRedisBytesPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100k keys per contender")
	}
	c := footprintClient(t, serverAddr(t))
	for _, fc := range footprintContenders() {
		t.Run(fc.name, func(t *testing.T) {
			perKey := bytesPerKey(t, c, fc.setup(t, c, matrixMode{deny: true}), 100_000)
			t.Logf("%s: %.1f B/key", fc.name, perKey)
			if strings.HasPrefix(fc.name, "sluice-") && perKey > redisBytesPerKeyBound {
				t.Errorf("%.1f B/key, above the %d promised", perKey, redisBytesPerKeyBound)
			}
		})
	}
}

// BenchmarkRedisBytesPerKey reports the same figure as a metric (B/key), in
// one run for Sluice and every peer; ns/op is the time to write the 100k
// keys and means little.
func BenchmarkRedisBytesPerKey(b *testing.B) {
	c := footprintClient(b, serverAddr(b))
	for _, fc := range footprintContenders() {
		b.Run(fc.name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				perKey = bytesPerKey(b, c, fc.setup(b, c, matrixMode{deny: true}), 100_000)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// scriptMicros is the server's time spent in scripts (EVALSHA and EVAL)
// since the last CONFIG RESETSTAT, in µs, and how many it ran. The commands
// a script calls are counted again under their own names, inside the
// script's time: counting them too would count them twice. Every contender
// here decides in one script, which the calls let a caller check.
func scriptMicros(tb testing.TB, c *goredis.Client) (usec, calls int64) {
	tb.Helper()
	for k, v := range info(tb, c, "commandstats") {
		if k != "cmdstat_evalsha" && k != "cmdstat_eval" {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch name {
			case "usec":
				usec += n
			case "calls":
				calls += n
			}
		}
	}
	return usec, calls
}

// costChunk is how many decisions each contender makes in one turn of
// BenchmarkServerCost.
const costChunk = 2000

// BenchmarkServerCost measures what a decision costs redis-server: the µs
// INFO commandstats counts in scripts, per decision, for Sluice's O(1)
// algorithms and the Redis peers. Each iteration is one round in which
// every contender, in turn, makes costChunk serial decisions on a hot key
// of its own between a CONFIG RESETSTAT and an INFO, so that a machine
// whose speed drifts weighs on all alike; a contender's figure is the
// median of its rounds:
//
//	BenchmarkServerCost/<allow|deny>  <contender>-µs  (server µs a decision)
//
// Run it with -benchtime Nx for N rounds, alone on its server: the
// statistics are the server's own. decisions/core-s in the README is 10⁶
// over a contender's figure.
func BenchmarkServerCost(b *testing.B) {
	c := footprintClient(b, serverAddr(b))
	ctx := context.Background()
	for _, deny := range []bool{false, true} {
		b.Run(map[bool]string{false: "allow", true: "deny"}[deny], func(b *testing.B) {
			cs := footprintContenders()
			steps := make([]decide, len(cs))
			keys := make([]string, len(cs))
			for i, fc := range cs {
				steps[i] = fc.setup(b, c, matrixMode{deny: deny, keys: 1})
				keys[i] = freshIdentity(b)
				if _, err := steps[i](ctx, keys[i]); err != nil { // loads the script; drains a deny key
					b.Fatal(err)
				}
			}
			b.Cleanup(func() { c.FlushDB(context.Background()) })
			rounds := make([][]float64, len(cs))
			b.ReportAllocs()
			for b.Loop() {
				for i := range cs {
					if err := c.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					for range costChunk {
						if _, err := steps[i](ctx, keys[i]); err != nil {
							b.Fatal(err)
						}
					}
					usec, calls := scriptMicros(b, c)
					if calls != costChunk {
						b.Fatalf("%s: %d scripts for %d decisions, want one each", cs[i].name, calls, costChunk)
					}
					rounds[i] = append(rounds[i], float64(usec)/costChunk)
				}
			}
			for i, fc := range cs {
				b.ReportMetric(stat.Median(rounds[i]), fc.name+"-µs")
			}
		})
	}
}
