package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// benchKeys are the key counts RunBenchmarks measures: one hot key (every
// call contends for it) and many keys (calls spread out, as a fleet's
// traffic is).
var benchKeys = []int{1, 10_000}

// benchAlgorithms are the algorithms RunBenchmarks measures, by name: the
// two a deployment usually picks.
var benchAlgorithms = []string{"gcra", "token-bucket"}

// benchPolicy admits every call of a benchmark, so every call writes: a
// burst of a billion, earned back over 30 days (one unit every 2.6ms). A
// key of the many-keys runs, visited less often than that, reads as fresh
// on most visits, as a client's key does between its requests.
var benchPolicy = core.Policy{Name: "bench", Limit: core.MaxLimit, Window: core.MaxWindow}

// RunBenchmarks measures a store: GCRA and the token bucket (those of them
// the harness declares), on the generic path and, when Capabilities.Scripts
// is set, the script path; for one key and for many keys; serial and with
// b.RunParallel. Each reports ns/op, allocations and decisions/s. It is
// meant to be called from the store's own benchmark:
//
//	func BenchmarkConformance(b *testing.B) { conformance.RunBenchmarks(b, newHarness) }
//
// Sub-benchmarks are named <path>/<algorithm>/keys=<n>/{serial,parallel}.
// The Limiters are configured as in production: no Clock, the default
// Timeout; the policy admits every call, so every call writes. A call that
// misses the default deadline is counted (errors/op), not failed: under
// load that is part of a store's performance. newHarness is called once per
// sub-benchmark run.
func RunBenchmarks(b *testing.B, newHarness func(b *testing.B) Harness) {
	caps := newHarness(b).Capabilities()
	declared := caps.Algorithms
	if declared == nil {
		declared = algorithm.All()
	}
	var algs []core.Algorithm
	for _, name := range benchAlgorithms {
		for _, a := range declared {
			if a.Name() == name {
				algs = append(algs, a)
			}
		}
	}
	if len(algs) == 0 {
		b.Skipf("the harness declares none of %v", benchAlgorithms)
	}
	for _, script := range pathsOf(caps) {
		b.Run(pathName(script), func(b *testing.B) {
			for _, alg := range algs {
				if _, ok := alg.(core.Scripted); script && !ok {
					continue
				}
				b.Run(alg.Name(), func(b *testing.B) {
					for _, keys := range benchKeys {
						b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
							b.Run("serial", func(b *testing.B) { benchmark(b, newHarness(b), alg, script, keys, false) })
							b.Run("parallel", func(b *testing.B) { benchmark(b, newHarness(b), alg, script, keys, true) })
						})
					}
				})
			}
		})
	}
}

func benchmark(b *testing.B, h Harness, alg core.Algorithm, script bool, keys int, parallel bool) {
	l, err := core.New(core.Config{
		Policy:    benchPolicy,
		Algorithm: alg, Store: h.NewStore(b), Prefix: keyPrefix, NoScript: !script,
	})
	if err != nil {
		b.Fatal(err)
	}
	base := fmt.Sprintf("%s#%016x:", b.Name(), rand.Uint64())
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = base + strconv.Itoa(i)
	}
	if keys == 1 {
		// A key lives for as long as its admissions take to earn back, which
		// for the one hot key can be an hour; many keys are touched a few
		// times each, and expire in moments.
		forget(b, l, ids[0])
	}
	ctx := context.Background()
	var errs errCount
	b.ReportAllocs()
	if !parallel {
		i := 0
		for b.Loop() {
			if _, err := l.Allow(ctx, ids[i]); err != nil {
				errs.add(b, err)
			}
			if i++; i == keys {
				i = 0
			}
		}
	} else {
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(keys)
			for pb.Next() {
				if _, err := l.Allow(ctx, ids[i]); err != nil {
					errs.add(b, err)
				}
				if i++; i == keys {
					i = 0
				}
			}
		})
	}
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
	if n := errs.n.Load(); n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "errors/op")
		b.Logf("%d of %d calls failed (the default %v deadline), first: %v", n, b.N, core.DefaultTimeout, *errs.first.Load())
		if n == int64(b.N) {
			b.Errorf("every call failed")
		}
	}
}

// errCount counts the calls that failed. A store that cannot decide within
// the default deadline (core.ErrUnavailable) is measured, not failed: under
// load that is part of its performance. Any other error fails the benchmark.
type errCount struct {
	n     atomic.Int64
	first atomic.Pointer[error]
	bad   atomic.Bool
}

func (c *errCount) add(b *testing.B, err error) {
	c.n.Add(1)
	c.first.CompareAndSwap(nil, &err)
	if !errors.Is(err, core.ErrUnavailable) && c.bad.CompareAndSwap(false, true) {
		b.Error(err)
	}
}
