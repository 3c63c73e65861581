package bench

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
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
// admitted nearly always (benchPolicy is a million per second). Each
// case has a go-redis client of its own with go-redis's defaults.

var redisBenchCases = []benchCase{
	{"sluice", func(tb testing.TB, addr string, alg core.Algorithm) benchStep {
		return redisBenchSluice(tb, addr, alg, nil)
	}},
	{"sluice-nobatch", func(tb testing.TB, addr string, alg core.Algorithm) benchStep {
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

func redisBenchSluice(tb testing.TB, addr string, alg core.Algorithm, opts *redis.Options) benchStep {
	s := redis.New(redisBenchClient(tb, addr), opts)
	tb.Cleanup(func() { _ = s.Close() })
	return limiterStep(tb, s, alg, time.Second)
}

func redisBenchEvalsha(tb testing.TB, addr string, alg core.Algorithm) benchStep {
	c := redisBenchClient(tb, addr)
	sc := alg.(core.Scripted).Script()
	keys := []string{store.Key{Namespace: "sluice:bench", Identity: freshIdentity(tb)}.String()}
	tb.Cleanup(func() { c.Del(context.Background(), keys...) })
	if err := c.ScriptLoad(context.Background(), sc.Source).Err(); err != nil {
		tb.Fatal(err)
	}
	a := core.NewScriptArgs(&benchPolicy, 0, 1)
	var argv []any
	for _, v := range sc.AppendArgv(nil, &a) {
		argv = append(argv, v)
	}
	return func(ctx context.Context) (bool, error) {
		v, err := c.EvalSha(ctx, sc.Hash, keys, argv...).Result()
		if err != nil {
			return false, err
		}
		var ints []int64
		switch v := v.(type) {
		case int64:
			ints = []int64{v}
		case []any:
			for _, x := range v {
				n, _ := x.(int64)
				ints = append(ints, n)
			}
		}
		r, err := sc.Result(ints, &a)
		return r[0] == 1, err
	}
}

func redisBenchRedisRate(tb testing.TB, addr string, _ core.Algorithm) benchStep {
	l := redis_rate.NewLimiter(redisBenchClient(tb, addr))
	key := freshIdentity(tb)
	limit := redis_rate.PerSecond(int(benchPolicy.Limit))
	tb.Cleanup(func() { _ = l.Reset(context.Background(), key) })
	return func(ctx context.Context) (bool, error) {
		res, err := l.Allow(ctx, key, limit)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}
}
