package valkey_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/valkey"
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
	b.Run("parallel64", func(b *testing.B) { benchParallel(b, 64, step) })
}

// BenchmarkSentinel is one decision through the store over a sentinel
// client (store), beside the same EVALSHA through valkey-go alone over one
// (raw), at 16, 64 and 256 goroutines: the figure of the batches for a
// client that is not standalone.
func BenchmarkSentinel(b *testing.B) {
	h := harness{addrs: []string{testenv.RedisSentinelAddr(b)}, master: testenv.SentinelMaster}
	sc := algorithm.GCRA{}.Script()
	a := core.NewScriptArgs(&benchPolicy, 0, 1)
	ctx := context.Background()
	for _, g := range []int{16, 64, 256} {
		b.Run("store/parallel"+strconv.Itoa(g), func(b *testing.B) {
			c := h.client(b)
			s := valkey.New(c, nil)
			b.Cleanup(func() { _ = s.Close() })
			key := freshKey(b, c)
			benchParallel(b, g, func() error {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				_, err := s.RunScript(cctx, sc, key, a)
				return err
			})
		})
		b.Run("raw/parallel"+strconv.Itoa(g), func(b *testing.B) {
			c := h.client(b)
			key := freshKey(b, c).String()
			argv := sc.AppendArgv(nil, &a)
			if err := c.Do(ctx, c.B().ScriptLoad().Script(sc.Source).Build()).Error(); err != nil {
				b.Fatal(err)
			}
			benchParallel(b, g, func() error {
				return c.Do(ctx, c.B().Evalsha().Sha1(sc.Hash).Numkeys(1).Key(key).Arg(argv...).Build()).Error()
			})
		})
	}
}

// benchParallel runs step from goroutines goroutines.
func benchParallel(b *testing.B, goroutines int, step func() error) {
	b.ReportAllocs()
	b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := step(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
