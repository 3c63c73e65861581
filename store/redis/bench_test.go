package redis

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// These measure the store alone (RunScript, without a Limiter or a
// deadline) against the floor, a raw go-redis EVALSHA of the same script
// with the same arguments. The comparisons with other libraries, through
// core.Limiter, live in the bench module.

var benchPolicy = core.Policy{Name: "bench", Limit: 1_000_000, Window: time.Second}

// benchRun runs op serially or from 64 goroutines and reports decisions/s.
func benchRun(b *testing.B, parallel bool, op func(ctx context.Context) error) {
	ctx := context.Background()
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			if err := op(ctx); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

func BenchmarkRunScript(b *testing.B) {
	sc := algorithm.GCRA{}.Script()
	for _, tc := range []struct {
		name string
		opts *Options
	}{{"batched", nil}, {"direct", &Options{NoBatch: true}}} {
		for _, parallel := range []bool{false, true} {
			name := tc.name + "/serial"
			if parallel {
				name = tc.name + "/parallel64"
			}
			b.Run(name, func(b *testing.B) {
				s := newStore(b, tc.opts)
				key := testKey(b, s.Client())
				benchRun(b, parallel, func(ctx context.Context) error {
					_, err := s.RunScript(ctx, sc, key, core.NewScriptArgs(&benchPolicy, 0, 1))
					return err
				})
			})
		}
	}
}

func BenchmarkRawEvalSha(b *testing.B) {
	sc := algorithm.GCRA{}.Script()
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel64"
		}
		b.Run(name, func(b *testing.B) {
			c := userClient(b)
			if err := c.ScriptLoad(context.Background(), sc.Source).Err(); err != nil {
				b.Fatal(err)
			}
			keys := []string{testKey(b, c).String()}
			a := core.NewScriptArgs(&benchPolicy, 0, 1)
			var argv []any
			for _, v := range sc.AppendArgv(nil, &a) {
				argv = append(argv, v)
			}
			benchRun(b, parallel, func(ctx context.Context) error {
				return c.EvalSha(ctx, sc.Hash, keys, argv...).Err()
			})
		})
	}
}
