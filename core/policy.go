package core

import (
	"fmt"
	"time"
)

// Bounds on a Policy. They keep every algorithm's integer arithmetic exact,
// in Go's int64 and in the float64 numbers of the Lua scripts (exact below
// 2^53), for every valid policy.
const (
	// MinWindow is the shortest Window a Policy accepts.
	MinWindow = time.Millisecond
	// MaxWindow is the longest Window (and MaxDelay, LeaseTTL) a Policy accepts.
	MaxWindow = 30 * 24 * time.Hour
	// MaxLimit is the largest Limit or Burst a Policy accepts.
	MaxLimit = 1_000_000_000
	// MaxHorizon bounds Burst × Interval: the time a full bucket takes to
	// drain at the policy's rate. About 407 days.
	MaxHorizon = time.Duration(1<<45) * time.Microsecond
	// MaxNameLen is the longest policy Name.
	MaxNameLen = 64
)

// Policy is one limit: Limit units per Window, with the extra knobs the
// bucket, queue and concurrency algorithms read. The zero value is not valid;
// Validate says why a Policy is rejected, naming the field.
//
// Which fields an algorithm reads:
//
//	fixed window, sliding log, sliding counter: Limit per Window
//	token bucket, GCRA: rate Limit/Window, capacity Burst
//	leaky bucket (queue): rate Limit/Window, capacity Burst, MaxDelay
//	concurrency: Limit in flight, LeaseTTL
type Policy struct {
	// Name identifies the policy in store keys and in the RateLimit-Policy
	// header: 1 to 64 characters from [A-Za-z0-9._-].
	Name string
	// Limit is the number of units admitted per Window (1 to MaxLimit), or
	// for the concurrency algorithm the number of leases held at once. At
	// most one unit per microsecond: Limit may not exceed Window in µs.
	Limit int64
	// Window is the period Limit applies to, from MinWindow to MaxWindow.
	Window time.Duration
	// Burst is the capacity of the token bucket, GCRA and leaky bucket: how
	// many units may be admitted at once after a quiet period. Zero means
	// Limit.
	Burst int64
	// MaxDelay is, for the leaky bucket, the longest a request may be queued
	// (admitted with Decision.Delay) before it is rejected instead. Zero
	// means Window.
	MaxDelay time.Duration
	// LeaseTTL is, for the concurrency algorithm, how long a lease that is
	// never released holds its slot before it is reclaimed. Zero means
	// Window.
	LeaseTTL time.Duration
}

// PerSecond returns a policy of limit units per second, burst limit.
func PerSecond(name string, limit int64) Policy {
	return Policy{Name: name, Limit: limit, Window: time.Second}
}

// PerMinute returns a policy of limit units per minute, burst limit.
func PerMinute(name string, limit int64) Policy {
	return Policy{Name: name, Limit: limit, Window: time.Minute}
}

// String prints the policy, for example "api: 25 per 2s (burst 25)".
func (p Policy) String() string {
	return fmt.Sprintf("%s: %d per %s (burst %d)", p.Name, p.Limit, p.Window, p.Capacity())
}

// Capacity is Burst, or Limit when Burst is zero.
func (p *Policy) Capacity() int64 {
	if p.Burst == 0 {
		return p.Limit
	}
	return p.Burst
}

// WindowMicros is Window in whole microseconds (Window is truncated).
func (p *Policy) WindowMicros() int64 { return int64(p.Window / time.Microsecond) }

// IntervalMicros is the time one unit takes to be earned back at the
// policy's rate: Window / Limit in microseconds, rounded up so that rounding
// never admits more than the rate. It is 0 for a Limit below 1, which
// Validate refuses.
func (p *Policy) IntervalMicros() int64 {
	if p.Limit < 1 {
		return 0
	}
	w := p.WindowMicros()
	return (w + p.Limit - 1) / p.Limit
}

// MaxDelayMicros is MaxDelay (or its default, Window) in microseconds.
func (p *Policy) MaxDelayMicros() int64 {
	if p.MaxDelay == 0 {
		return p.WindowMicros()
	}
	return int64(p.MaxDelay / time.Microsecond)
}

// LeaseTTLMicros is LeaseTTL (or its default, Window) in microseconds.
func (p *Policy) LeaseTTLMicros() int64 {
	if p.LeaseTTL == 0 {
		return p.WindowMicros()
	}
	return int64(p.LeaseTTL / time.Microsecond)
}

// Validate reports the first thing wrong with p as a *PolicyError (which
// matches ErrInvalidPolicy with errors.Is), or nil.
func (p *Policy) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &PolicyError{Policy: p.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if len(p.Name) == 0 || len(p.Name) > MaxNameLen {
		return bad("Name", "must be 1 to %d characters, got %d", MaxNameLen, len(p.Name))
	}
	for i := 0; i < len(p.Name); i++ {
		if !nameByte(p.Name[i]) {
			return bad("Name", "must use only A-Z a-z 0-9 . _ - (byte %d is %q)", i, p.Name[i:i+1])
		}
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return bad("Limit", "must be 1 to %d, got %d", MaxLimit, p.Limit)
	}
	if p.Window < MinWindow || p.Window > MaxWindow {
		return bad("Window", "must be %s to %s, got %s", MinWindow, MaxWindow, p.Window)
	}
	if p.Limit > p.WindowMicros() {
		return bad("Limit", "may not exceed one unit per microsecond (%d per %s)", p.Limit, p.Window)
	}
	if p.Burst < 0 || p.Burst > MaxLimit {
		return bad("Burst", "must be 0 (meaning Limit) or 1 to %d, got %d", MaxLimit, p.Burst)
	}
	if p.MaxDelay < 0 || p.MaxDelay > MaxWindow || (p.MaxDelay > 0 && p.MaxDelay < time.Microsecond) {
		return bad("MaxDelay", "must be 0 (meaning Window) or 1µs to %s, got %s", MaxWindow, p.MaxDelay)
	}
	if p.LeaseTTL < 0 || p.LeaseTTL > MaxWindow || (p.LeaseTTL > 0 && p.LeaseTTL < MinWindow) {
		return bad("LeaseTTL", "must be 0 (meaning Window) or %s to %s, got %s", MinWindow, MaxWindow, p.LeaseTTL)
	}
	// Burst × Interval, compared by division: the product of two valid
	// fields can overflow int64.
	if iv := p.IntervalMicros(); p.Capacity() > int64(MaxHorizon/time.Microsecond)/iv {
		return bad("Burst", "%d units at one per %s take longer than %s to drain; lower Burst or raise the rate",
			p.Capacity(), Micros(iv), MaxHorizon)
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
