package main

import (
	"testing"
	"time"
	"unsafe"
)

// Every latency up to histMax has a bucket, whose upper edge lies within
// 1/histSub of it (exact below 2·histSub µs); a caller's histogram is small
// enough for the most callers bench takes.
func TestHistogramBuckets(t *testing.T) {
	if got := bucketOf(histMax); got != histBuckets-1 {
		t.Fatalf("bucketOf(histMax) = %d, want %d", got, histBuckets-1)
	}
	prev := -1
	for us := int64(0); us <= histMax; us += 1 + us/97 {
		i := bucketOf(us)
		if i < prev {
			t.Fatalf("bucketOf(%d) = %d, below the bucket of a shorter latency (%d)", us, i, prev)
		}
		prev = i
		edge := upperEdge(i)
		if edge <= us || float64(edge-us) > float64(us)/histSub+1 {
			t.Fatalf("latency %d µs: bucket %d ends at %d", us, i, edge)
		}
	}
	if size := unsafe.Sizeof(histogram{}); size > 16<<10 {
		t.Errorf("a histogram is %d bytes: 10,000 callers would hold %d MB", size, size*10_000>>20)
	}
	h := newHistogram()
	for us := range 1000 {
		h.add(time.Duration(us) * time.Microsecond)
	}
	h.add(time.Hour) // counted as histMax, kept as the max
	if q := h.quantile(0.5); q < 499*time.Microsecond || q > 510*time.Microsecond {
		t.Errorf("median of 0..999 µs: %v", q)
	}
	if h.max != time.Hour || h.quantile(1) != time.Hour {
		t.Errorf("max %v, quantile(1) %v; want the hour", h.max, h.quantile(1))
	}
}
