package core

import (
	"sync"
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
