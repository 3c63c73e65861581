package memcache

import (
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// DefaultRetry is the retry bound of the compare-and-swap loop when
// Options.Retry leaves a field zero: 64 attempts, with a jittered backoff
// whose ceiling starts at 100µs and doubles up to 5ms (core's own defaults).
//
// Measured on a hot key (64 goroutines over 2 to 32 instances on one key,
// see the package doc), the per-key queue keeps conflicts to those between
// instances, and no update needed more than about 15 attempts: 64 is never
// reached, so a caller meets the Limiter's deadline long before a
// *store.ContentionError. Shorter or longer backoffs (50µs to 1ms, 100µs to
// 2ms) made no difference that the noise of the measurement did not hide;
// a 5ms ceiling spreads a few instances apart even where a round trip takes
// a millisecond, as across a network, and still fits many retries inside
// core.DefaultTimeout.
var DefaultRetry = store.RetryPolicy{
	MaxAttempts: 64,
	BaseBackoff: 100 * time.Microsecond,
	MaxBackoff:  5 * time.Millisecond,
}

// DefaultClockSkew is Options.ClockSkew when it is zero: one second, the
// skew the conformance suite checks the store under.
const DefaultClockSkew = time.Second

// Options configures a Store. A nil *Options means all defaults.
type Options struct {
	// Retry bounds the compare-and-swap loop (see store.CASUpdate). A zero
	// field takes its value from DefaultRetry.
	Retry store.RetryPolicy
	// Clock is no longer read. It was the clock against which a TTL
	// longer than 30 days was turned into an absolute Unix time; memcached
	// reads that against its own clock, so a process clock a month behind
	// wrote every such state already expired. The Store now reads the
	// servers' clocks (Servers).
	//
	// Deprecated: set Servers instead.
	Clock core.Clock
	// Servers lists the memcached servers the client was built with (the
	// arguments of gomemcache.New). A TTL longer than 30 days must be sent
	// as an absolute Unix time on memcached's own clock; gomemcache does not
	// expose its servers, so the Store reads each listed server's clock
	// itself ("stats" time, on a connection of its own: once at the first
	// such TTL, then in the background when a reading is a minute old; a
	// read that reaches no server is not tried again for 10 seconds) and
	// takes the latest, never the process's clock. Without Servers a TTL
	// longer than 30 days is sent as 30 days: a state then lives 30 days
	// after its last write, so a policy whose state needs longer (a
	// Burst·Interval, Window or LeaseTTL beyond 30 days) may meet a fresh
	// key after 30 idle days.
	Servers []string
	// ClockSkew is the largest disagreement between the clocks of the
	// instances that share the memcached servers. It is added to every TTL,
	// so that a state written by an instance whose clock runs ahead lives
	// until the instance furthest behind no longer needs it (an early
	// expiry would reset a counter that instance still counts on: see the
	// package doc). It costs only memory. Zero means DefaultClockSkew;
	// negative means none; more than store.MaxClockSkew means that.
	ClockSkew time.Duration
	// NoLocalQueue turns off the per-key queue inside the Store: by default
	// concurrent Updates of one key through one Store wait their turn in
	// process (in arrival order, each within its own deadline) instead of
	// all racing to the server, where all but one would lose and retry.
	NoLocalQueue bool
}

// config is Options with the defaults filled in.
type config struct {
	retry      store.RetryPolicy
	skew       time.Duration
	localQueue bool
	servers    []string
}

func (o *Options) config() config {
	c := config{retry: DefaultRetry, skew: DefaultClockSkew, localQueue: true}
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
	switch {
	case o.ClockSkew > 0:
		c.skew = min(o.ClockSkew, store.MaxClockSkew)
	case o.ClockSkew < 0:
		c.skew = 0
	}
	c.localQueue = !o.NoLocalQueue
	c.servers = append([]string(nil), o.Servers...)
	return c
}
