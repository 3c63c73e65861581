package valkey_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// The bench module compares this store with its peers (redis_rate, raw
// valkey-go) in one run; these benchmarks split one decision's cost into
// the client's, the store's and the Limiter's.

var benchPolicy = core.Policy{Name: "bench", Limit: 1_000_000, Window: time.Second}

// BenchmarkRunScript is one decision through the store alone (no Limiter).
func BenchmarkRunScript(b *testing.B) {
	s, c := newStore(b, backends[0].addrs(b))
	key := freshKey(b, c)
	sc := algorithm.GCRA{}.Script()
	args := core.NewScriptArgs(&benchPolicy, 0, 1)
	ctx := context.Background()
	benchBoth(b, func() error { _, err := s.RunScript(ctx, sc, key, args); return err })
}

// BenchmarkRawEvalsha is the same EVALSHA through valkey-go alone, with the
// key and arguments built once: the floor under RunScript.
func BenchmarkRawEvalsha(b *testing.B) {
	_, c := newStore(b, backends[0].addrs(b))
	key := freshKey(b, c).String()
	sc := algorithm.GCRA{}.Script()
	a := core.NewScriptArgs(&benchPolicy, 0, 1)
	argv := sc.AppendArgv(nil, &a)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().ScriptLoad().Script(sc.Source).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	benchBoth(b, func() error {
		_, err := c.Do(ctx, c.B().Evalsha().Sha1(sc.Hash).Numkeys(1).Key(key).Arg(argv...).Build()).AsInt64()
		return err
	})
}

// BenchmarkLimiter is one decision through core.Limiter and the store,
// with a per-call deadline (1s: the cost of any deadline, not tripped by a
// loaded machine).
func BenchmarkLimiter(b *testing.B) {
	s, _ := newStore(b, backends[0].addrs(b))
	l, err := core.New(core.Config{Policy: benchPolicy, Algorithm: algorithm.GCRA{}, Store: s, Prefix: "sluice-bench-" + randomHex(b), Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	benchBoth(b, func() error { _, err := l.Allow(ctx, "client"); return err })
}

func benchBoth(b *testing.B, step func() error) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := step(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := step(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
