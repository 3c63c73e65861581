package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
	valkeygo "github.com/valkey-io/valkey-go"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
	sredis "github.com/sluicehq/sluice/store/redis"
	svalkey "github.com/sluicehq/sluice/store/valkey"
)

// BenchmarkMatrix is the side-by-side table of the README: Sluice and the
// peers a user would pick instead, each deciding GCRA (or its own nearest
// algorithm) for the same limit, in one run:
//
//	BenchmarkMatrix/<backend>/<allow|deny>/<1key|100kkeys>/<contender>/<serial|parallel4|16|64|256>
//
// allow is a limit so high that nearly every decision admits and writes;
// deny is one unit an hour, every key drained before the clock starts, so
// every decision is a refusal. 100kkeys cycles through 100,000 identities
// (each goroutine from a random offset), so that a decision is rarely a
// cache hit in the store. Before the clock starts, each key is decided once
// in a random order of its own (see visit). Each contender has clients of
// its own, and a cell's contenders run in the order of the round (inTurn).
//
// In process: sluice (core.Limiter over store/memory), x/time/rate (one
// limiter, or a map of them under a mutex for many keys), sethvargo/go-limiter
// (memorystore), ulule/limiter (memory store), throttled (GCRA on memstore).
// On redis-server (SLUICE_REDIS_ADDR): sluice over store/redis and over
// store/valkey, go-redis/redis_rate, ulule/limiter's Redis store, and the
// floor of a lean GCRA script (GET, TIME, arithmetic, SET PX) sent by raw
// go-redis and by raw valkey-go EVALSHA.
func BenchmarkMatrix(b *testing.B) {
	backends := []struct {
		name       string
		contenders []contender
		addr       func(testing.TB) string
	}{
		{"memory", memoryContenders, func(testing.TB) string { return "" }},
		{"redis", redisContenders, serverAddr},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			addr := be.addr(b)
			for _, deny := range []bool{false, true} {
				b.Run(map[bool]string{false: "allow", true: "deny"}[deny], func(b *testing.B) {
					for _, keys := range []int{1, 100_000} {
						b.Run(keysName(keys), func(b *testing.B) {
							for _, c := range inTurn(b, be.contenders) {
								b.Run(c.name, func(b *testing.B) {
									m := matrixMode{deny: deny, keys: keys, addr: addr}
									step := c.setup(b, m)
									ids := identities(b, keys)
									visit(b, step, ids, addr != "")
									b.Run("serial", func(b *testing.B) { matrixSerial(b, step, ids) })
									for _, g := range []int{4, 16, 64, 256} {
										b.Run("parallel"+strconv.Itoa(g), func(b *testing.B) { matrixParallel(b, step, ids, g, deny) })
									}
								})
							}
						})
					}
				})
			}
		})
	}
}

// inTurn is contenders in the order of this round: SLUICE_MATRIX_ROUND
// "i/n" (make bench-table sets it) starts round i of n at contender
// (i-1)·len/n and wraps around, so that over the rounds each contender runs
// early and late in a cell. Whatever a position costs (the benchmark before
// it, the server's state, a machine that drifts over a minute) then weighs
// on every contender alike, not always on the first. Unset, the order is
// the listed one.
func inTurn(tb testing.TB, contenders []contender) []contender {
	v := os.Getenv("SLUICE_MATRIX_ROUND")
	if v == "" {
		return contenders
	}
	is, ns, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		tb.Fatalf("SLUICE_MATRIX_ROUND=%q: want i/n with 1 ≤ i ≤ n", v)
	}
	k := (i - 1) * len(contenders) / n
	return append(slices.Clip(contenders[k:]), contenders[:k]...)
}

func keysName(n int) string {
	if n == 1 {
		return "1key"
	}
	return strconv.Itoa(n/1000) + "kkeys"
}

// matrixMode is one row of the matrix.
type matrixMode struct {
	deny bool
	keys int
	addr string
}

// limit is the mode's quota per hour: a billion to admit, one to refuse.
func (m matrixMode) limit() int64 {
	if m.deny {
		return 1
	}
	return 1_000_000_000
}

// decide is one decision for key: admitted or not.
type decide func(ctx context.Context, key string) (bool, error)

type contender struct {
	name  string
	setup func(tb testing.TB, m matrixMode) decide
}

// identities are the keys a run cycles through, with a prefix of their own
// so that runs never share state on a live server.
func identities(tb testing.TB, n int) []string {
	tb.Helper()
	prefix := freshIdentity(tb)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = prefix + "-" + strconv.Itoa(i)
	}
	return ids
}

// visit decides every key once before the clock starts, in a random order
// that the run does not follow: under deny it spends each key's quota, and
// in process it gives every contender its per-key state. In a service, the
// order in which identities first came has nothing to do with the order of
// their later requests. Visited in the run's own order, a store that
// allocates an object per key would find them laid out in memory in the
// order it is asked for them, and the CPU's prefetcher would fetch each
// before it is needed: no per-key cache miss, which a service never gets.
// On a server, the visit also starts every contender's runs from the state
// a service would be in. Unvisited, how many of a run's decisions created
// their key depended on how fast the contender's earlier runs had walked
// the keys. Visited, a fixed window's key (ulule's) lives for its window
// and every decision finds it; a GCRA key under allow lives about a
// millisecond (its TAT is one 3.6 µs interval ahead, and PX is in whole
// ms), so nearly every decision finds it gone, as it would in a service at
// that limit. A server's visit is made by 64 goroutines (the 100,000
// decisions would take five seconds one at a time); in process, by one.
func visit(tb testing.TB, step decide, ids []string, remote bool) {
	tb.Helper()
	ctx := context.Background()
	order := rand.Perm(len(ids))
	workers := 1
	if remote {
		workers = 64
	}
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < len(order); k += workers {
				if _, err := step(ctx, ids[order[k]]); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		tb.Fatal(*e)
	}
}

func matrixSerial(b *testing.B, step decide, ids []string) {
	ctx := context.Background()
	i := rand.IntN(len(ids))
	var errs int
	var first error
	b.ReportAllocs()
	for b.Loop() {
		if _, err := step(ctx, ids[i]); err != nil {
			if errs++; first == nil {
				first = err
			}
		}
		if i++; i == len(ids) {
			i = 0
		}
	}
	reportRate(b)
	reportErrors(b, int64(errs), first)
}

// reportErrors reports the share of decisions that failed. A peer may give
// up on a contended key (throttled's memstore does after 10 CAS attempts):
// that is its figure, not a broken run. Sluice's contenders must not fail.
func reportErrors(b *testing.B, errs int64, first error) {
	if b.N > 0 {
		b.ReportMetric(float64(errs)/float64(b.N), "errors/op")
	}
	if errs > 0 && strings.HasPrefix(path.Base(path.Dir(b.Name())), "sluice") {
		b.Errorf("%d of %d decisions failed, the first with: %v", errs, b.N, first)
	}
}

func matrixParallel(b *testing.B, step decide, ids []string, goroutines int, deny bool) {
	ctx := context.Background()
	procs := runtime.GOMAXPROCS(0) // SetParallelism multiplies it
	b.SetParallelism(max(1, (goroutines+procs-1)/procs))
	b.ReportAllocs()
	b.ResetTimer()
	var errs atomic.Int64
	var first atomic.Pointer[error]
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(ids))
		for pb.Next() {
			ok, err := step(ctx, ids[i])
			if err != nil {
				// A copy, so that taking its address does not move err,
				// and with it every decision, to the heap.
				e := err
				errs.Add(1)
				first.CompareAndSwap(nil, &e)
				continue
			}
			if ok && deny && len(ids) == 1 {
				b.Error("a drained key was admitted")
				return
			}
			if i++; i == len(ids) {
				i = 0
			}
		}
	})
	reportRate(b)
	var err error
	if p := first.Load(); p != nil {
		err = *p
	}
	reportErrors(b, errs.Load(), err)
}

var memoryContenders = []contender{
	{"sluice", func(tb testing.TB, m matrixMode) decide {
		s := memory.New(nil)
		tb.Cleanup(func() { s.Close() })
		l, err := core.New(core.Config{Policy: core.Policy{Name: "m", Limit: m.limit(), Window: time.Hour}, Algorithm: algorithm.GCRA{}, Store: s})
		if err != nil {
			tb.Fatal(err)
		}
		return func(ctx context.Context, key string) (bool, error) {
			d, err := l.Allow(ctx, key)
			return d.Allowed, err
		}
	}},
	{"x-time-rate", func(tb testing.TB, m matrixMode) decide {
		every := rate.Every(time.Hour / time.Duration(m.limit()))
		if m.keys == 1 {
			l := rate.NewLimiter(every, int(m.limit()))
			return func(context.Context, string) (bool, error) { return l.Allow(), nil }
		}
		var mu sync.Mutex
		ls := make(map[string]*rate.Limiter, m.keys)
		return func(_ context.Context, key string) (bool, error) {
			mu.Lock()
			l := ls[key]
			if l == nil {
				l = rate.NewLimiter(every, int(m.limit()))
				ls[key] = l
			}
			mu.Unlock()
			return l.Allow(), nil
		}
	}},
	{"sethvargo", func(tb testing.TB, m matrixMode) decide {
		s, err := memorystore.New(&memorystore.Config{Tokens: uint64(m.limit()), Interval: time.Hour})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close(context.Background()) })
		return sethvargoDecide(s)
	}},
	{"ulule", func(tb testing.TB, m matrixMode) decide {
		l := ulule.New(ulmemory.NewStore(), ulule.Rate{Period: time.Hour, Limit: m.limit()})
		return func(ctx context.Context, key string) (bool, error) {
			c, err := l.Get(ctx, key)
			return !c.Reached, err
		}
	}},
	{"throttled", func(tb testing.TB, m matrixMode) decide {
		st, err := memstore.NewCtx(max(m.keys*2, 1024))
		if err != nil {
			tb.Fatal(err)
		}
		return throttledDecide(tb, st, m)
	}},
}

func sethvargoDecide(s golimiter.Store) decide {
	return func(ctx context.Context, key string) (bool, error) {
		_, _, _, ok, err := s.Take(ctx, key)
		return ok, err
	}
}

func throttledDecide(tb testing.TB, st throttled.GCRAStoreCtx, m matrixMode) decide {
	per := time.Hour / time.Duration(m.limit())
	burst := int(m.limit()) - 1
	if m.deny {
		burst = 0
	}
	l, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(1, per), MaxBurst: burst})
	if err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context, key string) (bool, error) {
		limited, _, err := l.RateLimitCtx(ctx, key, 1)
		return !limited, err
	}
}

// leanGCRA is the floor a Redis GCRA can cost: read the TAT, read the
// server's clock, compare, write with a TTL. ARGV: interval µs, burst.
const leanGCRA = `local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + interval
if new - tonumber(ARGV[2]) * interval > now then return 0 end
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000))
return 1`

func leanArgs(m matrixMode) (interval int64, burst int64) {
	return int64(time.Hour/time.Microsecond) / m.limit(), m.limit()
}

func matrixRedisClient(tb testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	tb.Cleanup(func() { c.Close() })
	return c
}

func matrixValkeyClient(tb testing.TB, addr string) valkeygo.Client {
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func sluiceDecide(tb testing.TB, s store.Store, m matrixMode) decide {
	// Default options: the per-call deadline is core.DefaultTimeout.
	l, err := core.New(core.Config{Policy: core.Policy{Name: "m", Limit: m.limit(), Window: time.Hour}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		tb.Fatal(err)
	}
	return func(ctx context.Context, key string) (bool, error) {
		d, err := l.Allow(ctx, key)
		return d.Allowed, err
	}
}

var redisContenders = []contender{
	{"sluice", func(tb testing.TB, m matrixMode) decide {
		s := sredis.New(matrixRedisClient(tb, m.addr), nil)
		tb.Cleanup(func() { s.Close() })
		return sluiceDecide(tb, s, m)
	}},
	{"sluice-valkey", func(tb testing.TB, m matrixMode) decide {
		s := svalkey.New(matrixValkeyClient(tb, m.addr), nil)
		tb.Cleanup(func() { s.Close() })
		return sluiceDecide(tb, s, m)
	}},
	{"redis_rate", func(tb testing.TB, m matrixMode) decide {
		return redisRateDecide(tb, matrixRedisClient(tb, m.addr), m)
	}},
	{"ulule", func(tb testing.TB, m matrixMode) decide {
		return ululeRedisDecide(tb, matrixRedisClient(tb, m.addr), m)
	}},
	{"lean-go-redis", func(tb testing.TB, m matrixMode) decide {
		return leanGoRedisDecide(tb, matrixRedisClient(tb, m.addr), m)
	}},
	{"lean-valkey-go", func(tb testing.TB, m matrixMode) decide {
		c := matrixValkeyClient(tb, m.addr)
		sc := valkeygo.NewLuaScript(leanGCRA)
		iv, burst := leanArgs(m)
		args := []string{strconv.FormatInt(iv, 10), strconv.FormatInt(burst, 10)}
		return func(ctx context.Context, key string) (bool, error) {
			n, err := sc.Exec(ctx, c, []string{key}, args).AsInt64()
			return n == 1, err
		}
	}},
}

// redisRateDecide is go-redis/redis_rate's GCRA on c.
func redisRateDecide(_ testing.TB, c *goredis.Client, m matrixMode) decide {
	l := redis_rate.NewLimiter(c)
	lim := redis_rate.Limit{Rate: int(m.limit()), Burst: int(m.limit()), Period: time.Hour}
	return func(ctx context.Context, key string) (bool, error) {
		r, err := l.Allow(ctx, key, lim)
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}
}

// ululeRedisDecide is ulule/limiter's Redis store on c.
func ululeRedisDecide(tb testing.TB, c *goredis.Client, m matrixMode) decide {
	st, err := ulredis.NewStore(c)
	if err != nil {
		tb.Fatal(err)
	}
	l := ulule.New(st, ulule.Rate{Period: time.Hour, Limit: m.limit()})
	return func(ctx context.Context, key string) (bool, error) {
		r, err := l.Get(ctx, key)
		return !r.Reached, err
	}
}

// leanGoRedisDecide is the lean GCRA script, sent by raw go-redis EVALSHA
// on c.
func leanGoRedisDecide(tb testing.TB, c *goredis.Client, m matrixMode) decide {
	sha, err := c.ScriptLoad(context.Background(), leanGCRA).Result()
	if err != nil {
		tb.Fatal(err)
	}
	iv, burst := leanArgs(m)
	return func(ctx context.Context, key string) (bool, error) {
		n, err := c.EvalSha(ctx, sha, []string{key}, iv, burst).Int64()
		return n == 1, err
	}
}

// TestMatrixBodies decides once through every contender of the matrix, so
// that make test proves each one connects and admits a fresh key and
// refuses a drained one.
func TestMatrixBodies(t *testing.T) {
	for _, be := range []struct {
		name string
		cs   []contender
		addr string
	}{{"memory", memoryContenders, ""}, {"redis", redisContenders, serverAddr(t)}} {
		for _, c := range be.cs {
			for _, deny := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/deny=%v", be.name, c.name, deny), func(t *testing.T) {
					step := c.setup(t, matrixMode{deny: deny, keys: 1, addr: be.addr})
					key := freshIdentity(t)
					ok, err := step(context.Background(), key)
					if err != nil || !ok {
						t.Fatalf("first decision on a fresh key: %v, %v; want admitted", ok, err)
					}
					ok, err = step(context.Background(), key)
					if err != nil || ok == deny {
						t.Fatalf("second decision (deny=%v): admitted %v, %v", deny, ok, err)
					}
				})
			}
		}
	}
}

// TestInTurn: each round runs every contender once, and over the rounds
// Sluice does not always go first.
func TestInTurn(t *testing.T) {
	const rounds = 3
	firsts := map[string]bool{}
	for i := 1; i <= rounds; i++ {
		t.Setenv("SLUICE_MATRIX_ROUND", fmt.Sprintf("%d/%d", i, rounds))
		got := inTurn(t, redisContenders)
		names := map[string]bool{}
		for _, c := range got {
			names[c.name] = true
		}
		if len(got) != len(redisContenders) || len(names) != len(redisContenders) {
			t.Fatalf("round %d: %d contenders, %d distinct; want each of %d once", i, len(got), len(names), len(redisContenders))
		}
		firsts[got[0].name] = true
	}
	if len(firsts) != rounds {
		t.Errorf("%d rounds began with %d distinct contenders: %v", rounds, len(firsts), firsts)
	}
	t.Setenv("SLUICE_MATRIX_ROUND", "")
	if got := inTurn(t, redisContenders); got[0].name != redisContenders[0].name {
		t.Errorf("unset, the order begins with %s", got[0].name)
	}
}
