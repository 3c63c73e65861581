package bench

import (
	"context"
	"runtime"
	"strconv"
	"testing"
)

// heapKeys is how many live keys the heap figures are taken at.
const heapKeys = 100_000

// heapPerKey is the Go heap one live key costs a contender of the matrix's
// memory backend, in bytes: the live heap after heapKeys distinct keys have
// each been decided once, less the live heap before, over heapKeys. The
// keys are in deny mode (one unit an hour), so none expires while it is
// measured. Each identity is made just before its decision and dropped
// after it, as a server's request would: a contender that keeps the
// identity pays for it, one that keeps a hash does not. The contender is
// set up before the first reading, so its fixed cost is not counted.
func heapPerKey(tb testing.TB, c contender) float64 {
	tb.Helper()
	step := c.setup(tb, matrixMode{deny: true, keys: heapKeys})
	prefix := freshIdentity(tb) + "-"
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range heapKeys {
		if _, err := step(ctx, prefix+strconv.Itoa(i)); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(step) // the store lives past the second reading
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / heapKeys
}

// BenchmarkHeapPerKey reports, as B/key, the Go heap a live key costs each
// in-process contender of BenchmarkMatrix, measured the same way for all
// (heapPerKey). Each iteration fills a fresh store.
func BenchmarkHeapPerKey(b *testing.B) {
	for _, c := range memoryContenders {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var sum float64
			for b.Loop() {
				sum += heapPerKey(b, c)
			}
			b.ReportMetric(sum/float64(b.N), "B/key")
		})
	}
}

// sluiceHeapPerKeyMax is the promise of store/memory's package doc: a live
// key takes at most 80 bytes (a 40-byte slot, the table at least half full).
const sluiceHeapPerKeyMax = 80

// TestSluiceHeapPerKey holds store/memory to its promise of heap per live
// key. Heap is not timing: the figure depends only on how the tables
// grow, so the test is deterministic enough to fail on a regression.
func TestSluiceHeapPerKey(t *testing.T) {
	for _, c := range memoryContenders {
		if c.name != "sluice" {
			continue
		}
		if got := heapPerKey(t, c); got > sluiceHeapPerKeyMax {
			t.Fatalf("sluice holds %.1f B of heap per live key at %d keys; want at most %d", got, heapKeys, sluiceHeapPerKeyMax)
		}
		return
	}
	t.Fatal("no sluice contender in memoryContenders")
}
