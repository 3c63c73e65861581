package memcache

import (
	"time"

	"github.com/sluicehq/sluice/core"
)

// DefaultRetry is the retry bound of the compare-and-swap loop when
// Options.Retry leaves a field zero: 64 attempts, with a jittered backoff
// whose ceiling starts at 100µs and doubles up to 5ms (core's own defaults).
//
// Measured on a hot key (64 goroutines over 2 to 32 instances on one key,
// see the package doc), the per-key queue keeps conflicts to those between
// instances, and no update needed more than about 15 attempts: 64 is never
// reached, so a caller meets the Limiter's deadline long before a
// *core.ContentionError. Shorter or longer backoffs (50µs to 1ms, 100µs to
// 2ms) made no difference that the noise of the measurement did not hide;
// a 5ms ceiling spreads a few instances apart even where a round trip takes
// a millisecond, as across a network, and still fits many retries inside
// core.DefaultTimeout.
var DefaultRetry = core.RetryPolicy{
	MaxAttempts: 64,
	BaseBackoff: 100 * time.Microsecond,
	MaxBackoff:  5 * time.Millisecond,
}

// DefaultClockSkew is Options.ClockSkew when it is zero: one second, the
// skew the conformance suite checks the store under.
const DefaultClockSkew = time.Second

// Options configures a Store. A nil *Options means all defaults.
type Options struct {
	// Retry bounds the compare-and-swap loop (see core.CASUpdate). A zero
	// field takes its value from DefaultRetry.
	Retry core.RetryPolicy
	// Clock is the wall clock against which a TTL longer than 30 days is
	// turned into an absolute Unix time (memcached reads a longer
	// expiration that way, against its own clock), so it must read real
	// time: a Limiter's ManualClock does not belong here. It is never used
	// to decide: the Limiter's clock does that. Nil means core.SystemClock.
	Clock core.Clock
	// ClockSkew is the largest disagreement between the clocks of the
	// instances that share the memcached servers. It is added to every TTL,
	// so that a state written by an instance whose clock runs ahead lives
	// until the instance furthest behind no longer needs it (an early
	// expiry would reset a counter that instance still counts on: see the
	// package doc). It costs only memory. Zero means DefaultClockSkew;
	// negative means none.
	ClockSkew time.Duration
	// NoLocalQueue turns off the per-key queue inside the Store: by default
	// concurrent Updates of one key through one Store wait their turn in
	// process (in arrival order, each within its own deadline) instead of
	// all racing to the server, where all but one would lose and retry.
	NoLocalQueue bool
}

// config is Options with the defaults filled in.
type config struct {
	retry      core.RetryPolicy
	clock      core.Clock
	skew       time.Duration
	localQueue bool
}

func (o *Options) config() config {
	c := config{retry: DefaultRetry, clock: core.SystemClock{}, skew: DefaultClockSkew, localQueue: true}
	if o == nil {
		return c
	}
	if o.Retry.MaxAttempts > 0 {
		c.retry.MaxAttempts = o.Retry.MaxAttempts
	}
	if o.Retry.BaseBackoff > 0 {
		c.retry.BaseBackoff = o.Retry.BaseBackoff
	}
	if o.Retry.MaxBackoff > 0 {
		c.retry.MaxBackoff = o.Retry.MaxBackoff
	}
	if c.retry.MaxBackoff < c.retry.BaseBackoff {
		c.retry.MaxBackoff = c.retry.BaseBackoff
	}
	if o.Clock != nil {
		c.clock = o.Clock
	}
	switch {
	case o.ClockSkew > 0:
		c.skew = o.ClockSkew
	case o.ClockSkew < 0:
		c.skew = 0
	}
	c.localQueue = !o.NoLocalQueue
	return c
}
