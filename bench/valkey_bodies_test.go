package bench

import (
	"context"
	"testing"
)

// TestValkeyBenchBodies runs each BenchmarkValkey body once, so that the
// ordinary test run proves every case connects, decides and admits a fresh
// key, not only the benchmark run.
func TestValkeyBenchBodies(t *testing.T) {
	addr := valkeyAddr(t)
	for _, alg := range valkeyAlgorithms {
		for _, c := range valkeyCases {
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
