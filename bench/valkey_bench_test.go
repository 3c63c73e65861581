package bench

import (
	"testing"
)

// BenchmarkValkey runs every case for GCRA and the token bucket, serial and
// with 64 goroutines, in one run so that the figures share the machine's
// state: BenchmarkValkey/<algorithm>/<case>/{serial,parallel64}. redis_rate
// has GCRA only; it appears under both algorithms as the same peer.
func BenchmarkValkey(b *testing.B) { runCases(b, valkeyCases) }
