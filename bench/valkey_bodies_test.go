package bench

import (
	"testing"
)

// TestValkeyBenchBodies runs each BenchmarkValkey body once, so that the
// ordinary test run proves every case connects, decides and admits a fresh
// key, not only the benchmark run.
func TestValkeyBenchBodies(t *testing.T) { testBodies(t, valkeyCases) }
