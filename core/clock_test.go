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

// TestWallMicrosAnchorSurvivesADescheduledRead: the thread that anchors
// the clock can lose its core between the wall reading and the monotonic
// one (time.Now makes them one after the other), for as long as the
// scheduler likes on a loaded machine. An anchor made of those two readings
// would put every reading of the next second that much in the past, and a
// limiter whose readings lag and then catch up sees more time pass than
// did: it admits what the rate earns in the lag, once more.
func TestWallMicrosAnchorSurvivesADescheduledRead(t *testing.T) {
	const stall = 20 * time.Millisecond
	t.Cleanup(func() { anchorStall.Store(nil); wallAnchor.Store(nil) })
	sleep := func() { time.Sleep(stall) } // descheduled after the wall reading
	anchorStall.Store(&sleep)
	wallAnchor.Store(nil)
	wallMicros() // anchors, with the stall in the middle
	anchorStall.Store(nil)
	for i := 0; i < 100; i++ {
		before := time.Now().UnixMicro()
		got := wallMicros()
		after := time.Now().UnixMicro()
		if got < before-100 || got > after+100 {
			t.Fatalf("after an anchoring read stalled %v: wallMicros() = %d, outside [%d, %d] by %v",
				stall, got, before, after, time.Duration(max(before-got, got-after))*time.Microsecond)
		}
	}
}
