package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/redis"
)

// The Redis store against its peers, on one redis-server, in one run:
//
//	sluice           core.Limiter over store/redis (batcher on), a per-call
//	                 deadline of 1s (it costs what the default 100ms costs,
//	                 and a loaded machine does not trip it)
//	sluice-nobatch   the same with redis.Options.NoBatch: one round trip
//	                 per decision, as a plain go-redis call
//	go-redis-evalsha go-redis alone: EVALSHA of the same Lua script with the
//	                 same arguments, the key and arguments built once, no
//	                 deadline: the floor for one round trip per decision
//	redis_rate       go-redis/redis_rate v10 (GCRA, the same limit)
//
// Every case decides one unit for one hot key, on the server's clock,
// admitted nearly always (redisBenchPolicy is a million per second). Each
// case has a go-redis client of its own with go-redis's defaults.

// redisBenchPolicy is the limit every case enforces.
var redisBenchPolicy = core.Policy{Name: "bench", Limit: 1_000_000, Window: time.Second}

var redisBenchAlgorithms = []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}}

// redisBenchAddr is the redis-server to measure against, from
// SLUICE_REDIS_ADDR (scripts/servers.sh sets it). The bench module cannot
// import the main module's internal/testenv, so it repeats its rule:
// missing is a failure when SLUICE_REQUIRE_SERVERS or CI is set, a skip
// otherwise.
func redisBenchAddr(tb testing.TB) string {
	tb.Helper()
	if a := os.Getenv("SLUICE_REDIS_ADDR"); a != "" {
		return a
	}
	if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
		tb.Fatal("SLUICE_REDIS_ADDR is not set: run through scripts/servers.sh (make bench)")
	}
	tb.Skip("SLUICE_REDIS_ADDR is not set; scripts/servers.sh starts a redis-server for these benchmarks")
	return ""
}

// redisBenchStep is one decision of a case: whether it was admitted.
type redisBenchStep func(ctx context.Context) (allowed bool, err error)

// redisBenchCase builds a step against addr for alg; it registers its
// teardown with tb.Cleanup.
type redisBenchCase struct {
	name  string
	setup func(tb testing.TB, addr string, alg core.Algorithm) redisBenchStep
}

var redisBenchCases = []redisBenchCase{
	{"sluice", func(tb testing.TB, addr string, alg core.Algorithm) redisBenchStep {
		return redisBenchSluice(tb, addr, alg, nil)
	}},
	{"sluice-nobatch", func(tb testing.TB, addr string, alg core.Algorithm) redisBenchStep {
		return redisBenchSluice(tb, addr, alg, &redis.Options{NoBatch: true})
	}},
	{"go-redis-evalsha", redisBenchEvalsha},
	{"redis_rate", redisBenchRedisRate},
}

func redisBenchClient(tb testing.TB, addr string) *goredis.Client {
	tb.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	tb.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("redis at %s: %v", addr, err)
	}
	return c
}

// redisBenchIdentity is an identity no earlier run used.
func redisBenchIdentity(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "bench-" + hex.EncodeToString(b[:])
}

func redisBenchSluice(tb testing.TB, addr string, alg core.Algorithm, opts *redis.Options) redisBenchStep {
	s := redis.New(redisBenchClient(tb, addr), opts)
	tb.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{Policy: redisBenchPolicy, Algorithm: alg, Store: s, Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	id := redisBenchIdentity(tb)
	tb.Cleanup(func() { _ = l.Reset(context.Background(), id) })
	return func(ctx context.Context) (bool, error) {
		d, err := l.Allow(ctx, id)
		return d.Allowed, err
	}
}

func redisBenchEvalsha(tb testing.TB, addr string, alg core.Algorithm) redisBenchStep {
	c := redisBenchClient(tb, addr)
	sc := alg.(core.Scripted).Script()
	keys := []string{core.Key{Namespace: "sluice:bench", Identity: redisBenchIdentity(tb)}.String()}
	tb.Cleanup(func() { c.Del(context.Background(), keys...) })
	if err := c.ScriptLoad(context.Background(), sc.Source).Err(); err != nil {
		tb.Fatal(err)
	}
	a := core.NewScriptArgs(&redisBenchPolicy, 0, 1)
	argv := []any{a.Now, a.N, a.Limit, a.Window, a.Burst, a.Interval, a.MaxDelay, a.LeaseTTL, strconv.FormatUint(a.Lease, 10), a.Op}
	return func(ctx context.Context) (bool, error) {
		vs, err := c.EvalSha(ctx, sc.Hash, keys, argv...).Int64Slice()
		if err != nil || len(vs) == 0 {
			return false, err
		}
		return vs[0] == 1, nil
	}
}

func redisBenchRedisRate(tb testing.TB, addr string, _ core.Algorithm) redisBenchStep {
	l := redis_rate.NewLimiter(redisBenchClient(tb, addr))
	key := redisBenchIdentity(tb)
	limit := redis_rate.PerSecond(int(redisBenchPolicy.Limit))
	tb.Cleanup(func() { _ = l.Reset(context.Background(), key) })
	return func(ctx context.Context) (bool, error) {
		res, err := l.Allow(ctx, key, limit)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}
}
