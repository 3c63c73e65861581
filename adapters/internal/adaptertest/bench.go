package adaptertest

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// BenchPolicy is the policy the adapter benchmarks measure: one
// fixed-window layer keyed by client address over a memory store, with a
// limit no benchmark reaches, so every request is admitted and the
// middleware does all of its work (address, key, decision, fields).
func BenchPolicy(b *testing.B) *nethttp.Policy {
	b.Helper()
	l := Limiter(b, algorithm.FixedWindow{}, core.Policy{Name: "bench", Limit: core.MaxLimit, Window: core.MaxWindow})
	return Policy(b, nethttp.Config{Layers: []nethttp.Layer{{Limiter: l}}})
}

// discard is a ResponseWriter that keeps nothing but its status and its
// header map, which is cleared (not reallocated) between requests, so the
// benchmark counts only what the handler chain allocates.
type discard struct {
	h      http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(status int)      { d.status = status }

// Bench serves GET path through h b.N times, serially and, in a second
// sub-benchmark, from parallel goroutines (each with its own client
// address), and fails if any response is not 200. Besides ns/op it reports
// cpu-ns/op, the process's CPU time per request (garbage collection
// included), which a loaded machine inflates far less than the wall clock.
func Bench(b *testing.B, h http.Handler, path string) {
	b.Run("serial", func(b *testing.B) {
		r, _ := http.NewRequest("GET", path, nil)
		r.RemoteAddr = "203.0.113.7:40000"
		w := &discard{h: http.Header{}}
		b.ReportAllocs()
		defer reportCPU(b)()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, r)
			if w.status != 0 && w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Int64
		var bad atomic.Int64
		b.ReportAllocs()
		defer reportCPU(b)()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			n := next.Add(1)
			r, _ := http.NewRequest("GET", path, nil)
			r.RemoteAddr = "198.51.100." + strconv.FormatInt(n%250, 10) + ":40000"
			w := &discard{h: http.Header{}}
			for pb.Next() {
				clear(w.h)
				w.status = 0
				h.ServeHTTP(w, r)
				if w.status != 0 && w.status != http.StatusOK {
					bad.Add(1)
				}
			}
		})
		if bad.Load() > 0 {
			b.Fatalf("%d responses were not 200", bad.Load())
		}
	})
}

// reportCPU starts measuring CPU time; the function it returns reports it
// per operation.
func reportCPU(b *testing.B) func() {
	start, ok := cpuTime()
	return func() {
		end, ok2 := cpuTime()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// Noop is the handler every benchmark ends in.
var Noop = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
