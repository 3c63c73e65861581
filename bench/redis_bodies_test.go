package bench

import (
	"testing"
)

// TestRedisBenchBodies runs each BenchmarkRedis body once, so that the
// ordinary test run proves every case connects, decides and admits a fresh
// key, not only the benchmark run.
func TestRedisBenchBodies(t *testing.T) { testBodies(t, redisBenchCases) }
