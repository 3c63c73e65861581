package bench

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// The Valkey store against its peers, on one redis-server, in one run:
//
//	sluice          core.Limiter over store/valkey with a per-call deadline
//	                (Config.Timeout 1s: it costs what the default 100ms
//	                costs, and a loaded machine does not trip it)
//	sluice-nodl     the same with Config.Timeout < 0: no per-call deadline,
//	                which shows what the deadline itself costs
//	valkey-evalsha  valkey-go alone: EVALSHA of the same Lua script, the key
//	                and arguments built once, no deadline: the floor
//	redis_rate      go-redis/redis_rate v10 (GCRA) on a go-redis client
//
// Every case decides one unit for one hot key, admitted nearly always
// (benchPolicy is a million per second).

var valkeyCases = []benchCase{
	{"sluice", func(tb testing.TB, addr string, alg core.Algorithm) benchStep {
		return valkeySluice(tb, addr, alg, time.Second)
	}},
	{"sluice-nodl", func(tb testing.TB, addr string, alg core.Algorithm) benchStep {
		return valkeySluice(tb, addr, alg, -1)
	}},
	{"valkey-evalsha", valkeyRawEvalsha},
	{"redis_rate", valkeyRedisRate},
}

func valkeyClient(tb testing.TB, addr string) valkeygo.Client {
	tb.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		tb.Fatalf("valkey-go client for %s: %v", addr, err)
	}
	tb.Cleanup(c.Close)
	return c
}

func valkeySluice(tb testing.TB, addr string, alg core.Algorithm, timeout time.Duration) benchStep {
	c := valkeyClient(tb, addr)
	return limiterStep(tb, valkey.New(c, nil), alg, timeout)
}

func valkeyRawEvalsha(tb testing.TB, addr string, alg core.Algorithm) benchStep {
	c := valkeyClient(tb, addr)
	sc := alg.(core.Scripted).Script()
	key := store.Key{Namespace: "sluice:bench", Identity: freshIdentity(tb)}.String()
	tb.Cleanup(func() { c.Do(context.Background(), c.B().Del().Key(key).Build()) })
	if err := c.Do(context.Background(), c.B().ScriptLoad().Script(sc.Source).Build()).Error(); err != nil {
		tb.Fatal(err)
	}
	a := core.NewScriptArgs(&benchPolicy, 0, 1)
	argv := sc.AppendArgv(nil, &a)
	return func(ctx context.Context) (bool, error) {
		resp := c.Do(ctx, c.B().Evalsha().Sha1(sc.Hash).Numkeys(1).Key(key).Arg(argv...).Build())
		var ints []int64
		if n, err := resp.AsInt64(); err == nil {
			ints = append(ints, n)
		} else {
			vs, err := resp.ToArray()
			if err != nil {
				return false, err
			}
			for _, v := range vs {
				n, err := v.ToInt64()
				if err != nil {
					return false, err
				}
				ints = append(ints, n)
			}
		}
		r, err := sc.Result(ints, &a)
		return r[0] == 1, err
	}
}

func valkeyRedisRate(tb testing.TB, addr string, _ core.Algorithm) benchStep {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	tb.Cleanup(func() { _ = rdb.Close() })
	l := redis_rate.NewLimiter(rdb)
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
