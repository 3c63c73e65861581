package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// What the Redis and Valkey benchmarks share: the policy, the algorithms,
// the server, and how a case is run serially and from 64 goroutines.

// benchPolicy is the limit every case enforces: a million per second, so
// one hot key is admitted nearly always and every decision writes.
var benchPolicy = core.Policy{Name: "bench", Limit: 1_000_000, Window: time.Second}

var benchAlgorithms = []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}}

// serverAddr is the redis-server to measure against, from SLUICE_REDIS_ADDR
// (scripts/servers.sh sets it). The bench module cannot import the main
// module's internal/testenv, so it repeats its rule: missing is a failure
// when SLUICE_REQUIRE_SERVERS or CI is set, a skip otherwise.
func serverAddr(tb testing.TB) string {
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

// freshIdentity is an identity no earlier run used.
func freshIdentity(tb testing.TB) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "bench-" + hex.EncodeToString(b[:])
}

// limiterStep is one decision through a core.Limiter on s, for an identity
// of its own that is reset when the benchmark ends.
func limiterStep(tb testing.TB, s store.Store, alg core.Algorithm, timeout time.Duration) benchStep {
	l, err := core.New(core.Config{Policy: benchPolicy, Algorithm: alg, Store: s, Timeout: timeout})
	if err != nil {
		tb.Fatal(err)
	}
	id := freshIdentity(tb)
	tb.Cleanup(func() { _ = l.Reset(context.Background(), id) })
	return func(ctx context.Context) (bool, error) {
		d, err := l.Allow(ctx, id)
		return d.Allowed, err
	}
}

// benchStep is one decision of a case: whether it was admitted.
type benchStep func(ctx context.Context) (allowed bool, err error)

// benchCase builds a step against addr for alg; it registers its teardown
// with tb.Cleanup.
type benchCase struct {
	name  string
	setup func(tb testing.TB, addr string, alg core.Algorithm) benchStep
}

// runCases runs every case for every algorithm, serial and with 64
// goroutines, in one run so that the figures share the machine's state:
// <algorithm>/<case>/{serial,parallel64}.
func runCases(b *testing.B, cases []benchCase) {
	addr := serverAddr(b)
	for _, alg := range benchAlgorithms {
		b.Run(alg.Name(), func(b *testing.B) {
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					b.Run("serial", func(b *testing.B) { benchSerial(b, c.setup(b, addr, alg)) })
					b.Run("parallel64", func(b *testing.B) { benchParallel(b, c.setup(b, addr, alg), 64) })
				})
			}
		})
	}
}

func benchSerial(b *testing.B, step benchStep) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// benchParallel runs step from goroutines goroutines: SetParallelism
// multiplies GOMAXPROCS.
func benchParallel(b *testing.B, step benchStep, goroutines int) {
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
	reportRate(b)
}

func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
}

// testBodies runs each case's body once, so that the ordinary test run
// proves every case connects, decides and admits a fresh key.
func testBodies(t *testing.T, cases []benchCase) {
	addr := serverAddr(t)
	for _, alg := range benchAlgorithms {
		for _, c := range cases {
			t.Run(alg.Name()+"/"+c.name, func(t *testing.T) {
				allowed, err := c.setup(t, addr, alg)(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !allowed {
					t.Fatalf("the first decision on a fresh key was a denial")
				}
			})
		}
	}
}
