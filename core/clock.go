package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time. A Limiter reads it once per decision, and once more
// per attempt on a compare-and-swap store (see Retimer).
type Clock interface {
	Now() time.Time
}

// SystemClock is the machine's wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to, for tests and
// simulations. It is safe for concurrent use. The zero value reads the Unix
// epoch; NewManualClock starts it elsewhere.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock that reads t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		return time.Unix(0, 0)
	}
	return c.now
}

// Advance moves the clock by d, which may be negative (a clock that steps
// backwards is one of the cases every algorithm must survive).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = time.Unix(0, 0)
	}
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Micros converts a duration in whole microseconds to a time.Duration.
func Micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// wallMicros is the wall clock in µs since the epoch, read at the cost of
// the monotonic clock alone: a wall reading taken at most a second ago plus
// the monotonic time since. time.Now reads both clocks, and on a virtual
// machine that is a third of an in-memory decision. The anchor is right to
// maxAnchorSpread/2 (see reanchor). Within the second the reading drifts
// from the wall clock only by what NTP slews in a second (microseconds); a
// step of the wall clock is seen at the next anchor, and an anchor that
// lands earlier than the last reading looks like a clock that stood still
// or stepped back, which every algorithm survives.
func wallMicros() int64 {
	if a := wallAnchor.Load(); a != nil {
		if d := time.Since(a.mono); d >= 0 && d < time.Second {
			return a.wall + int64(d/time.Microsecond)
		}
	}
	return reanchor()
}

// reanchor reads the wall clock between two monotonic readings and, when
// they are at most maxAnchorSpread apart, anchors at their midpoint: the
// wall reading was taken somewhere between them, so the anchor is right to
// half the spread. A thread that lost its core in between (time.Now reads
// the wall clock and the monotonic clock one after the other, and a loaded
// machine can deschedule it there for milliseconds) makes no anchor: its
// wall reading is still right for the instant it was taken, and is
// returned; the next call anchors again.
func reanchor() int64 {
	before := time.Now()
	w := time.Now().UnixMicro()
	if stall := anchorStall.Load(); stall != nil {
		(*stall)()
	}
	after := time.Now()
	if spread := after.Sub(before); spread >= 0 && spread <= maxAnchorSpread {
		wallAnchor.Store(&anchor{wall: w, mono: before.Add(spread / 2)})
	}
	return w
}

// maxAnchorSpread bounds the monotonic time around an anchor's wall
// reading, so that wallMicros is within half of it of the wall clock. The
// three readings take well under a microsecond on a machine that does not
// deschedule the thread.
const maxAnchorSpread = 5 * time.Microsecond

// anchorStall, when set, runs between an anchor's wall reading and the
// monotonic one after it: a test's stand-in for a thread descheduled there.
var anchorStall atomic.Pointer[func()]

type anchor struct {
	wall int64     // µs since the epoch at mono
	mono time.Time // carries the monotonic reading
}

var wallAnchor atomic.Pointer[anchor]
