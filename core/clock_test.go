package core

import (
	"testing"
	"time"
)

func TestWallMicrosFollowsTheWallClock(t *testing.T) {
	for i := 0; i < 1000; i++ {
		before := time.Now().UnixMicro()
		got := wallMicros()
		after := time.Now().UnixMicro()
		// The anchor is at most a second old; monotonic and wall time agree
		// to far better than a millisecond over a second.
		if got < before-1000 || got > after+1000 {
			t.Fatalf("wallMicros() = %d, outside [%d, %d] by more than 1ms", got, before, after)
		}
	}
}

func TestManualClock(t *testing.T) {
	var c ManualClock
	if got := c.Now(); !got.Equal(time.Unix(0, 0)) {
		t.Fatalf("zero ManualClock reads %v, want the epoch", got)
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c.Set(start)
	c.Advance(-time.Second)
	if got := c.Now(); !got.Equal(start.Add(-time.Second)) {
		t.Fatalf("after Advance(-1s): %v", got)
	}
}

func BenchmarkWallMicros(b *testing.B) {
	var s int64
	for b.Loop() {
		s += wallMicros()
	}
	_ = s
}
