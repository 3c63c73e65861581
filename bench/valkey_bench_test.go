package bench

import (
	"context"
	"runtime"
	"testing"
)

// BenchmarkValkey runs every case for GCRA and the token bucket, serial and
// with 64 goroutines, in one run so that the figures share the machine's
// state: BenchmarkValkey/<algorithm>/<case>/{serial,parallel64}. redis_rate
// has GCRA only; it appears under both algorithms as the same peer.
func BenchmarkValkey(b *testing.B) {
	addr := valkeyAddr(b)
	for _, alg := range valkeyAlgorithms {
		b.Run(alg.Name(), func(b *testing.B) {
			for _, c := range valkeyCases {
				b.Run(c.name, func(b *testing.B) {
					b.Run("serial", func(b *testing.B) { valkeySerial(b, c.setup(b, addr, alg)) })
					b.Run("parallel64", func(b *testing.B) { valkeyParallel(b, c.setup(b, addr, alg), 64) })
				})
			}
		})
	}
}

func valkeySerial(b *testing.B, step valkeyStep) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	valkeyRate(b)
}

// valkeyParallel runs step from goroutines goroutines: SetParallelism
// multiplies GOMAXPROCS.
func valkeyParallel(b *testing.B, step valkeyStep, goroutines int) {
	ctx := context.Background()
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism(max(1, (goroutines+procs-1)/procs))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := step(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	valkeyRate(b)
}

func valkeyRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
}
