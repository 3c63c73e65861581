package bench

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRedis runs every case for GCRA and the token bucket, serial and
// with 64 goroutines, in one run so that the figures share the machine's
// state: BenchmarkRedis/<algorithm>/<case>/{serial,parallel64}. redis_rate
// has GCRA only; it appears under both algorithms as the same peer.
func BenchmarkRedis(b *testing.B) { runCases(b, redisBenchCases) }

// BenchmarkRedisPaired measures the serial overhead of Sluice over a raw
// go-redis EVALSHA of the same script: each iteration makes one decision
// through each, in alternating order, and times both, so that a machine
// whose speed drifts (other processes, frequency scaling) weighs on both
// alike. It reports each one's µs per decision and their ratio; ns/op and
// allocs/op count the pair.
func BenchmarkRedisPaired(b *testing.B) {
	addr := serverAddr(b)
	for _, alg := range benchAlgorithms {
		b.Run(alg.Name(), func(b *testing.B) {
			steps := [2]benchStep{
				redisBenchCases[0].setup(b, addr, alg), // sluice
				redisBenchEvalsha(b, addr, alg),
			}
			ctx := context.Background()
			var spent [2]time.Duration
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				for j := range 2 {
					k := (i + j) % 2
					start := time.Now()
					if _, err := steps[k](ctx); err != nil {
						b.Fatal(err)
					}
					spent[k] += time.Since(start)
				}
				i++
			}
			n := float64(i)
			b.ReportMetric(float64(spent[0].Microseconds())/n, "sluice-µs/op")
			b.ReportMetric(float64(spent[1].Microseconds())/n, "evalsha-µs/op")
			b.ReportMetric(float64(spent[0])/float64(spent[1]), "sluice/evalsha")
		})
	}
}
