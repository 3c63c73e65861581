package bench

import (
	"context"
	"testing"
)

// TestRedisBenchBodies runs each BenchmarkRedis body once, so that the
// ordinary test run proves every case connects, decides and admits a fresh
// key, not only the benchmark run.
func TestRedisBenchBodies(t *testing.T) {
	addr := redisBenchAddr(t)
	for _, alg := range redisBenchAlgorithms {
		for _, c := range redisBenchCases {
			t.Run(alg.Name()+"/"+c.name, func(t *testing.T) {
				step := c.setup(t, addr, alg)
				allowed, err := step(context.Background())
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
