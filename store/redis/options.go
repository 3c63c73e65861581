package redis

import (
	"runtime"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Defaults for Options.
const (
	// DefaultMaxBatch is the most decisions one pipeline carries.
	DefaultMaxBatch = 64
	// DefaultClockSkew is Options.ClockSkew when it is zero, as in
	// store/valkey.
	DefaultClockSkew = time.Second
)

// Options configures a Store. A nil *Options means the defaults; so does the
// zero value of every field.
type Options struct {
	// NoBatch turns the batcher off: every script decision is then its own
	// round trip, as with a plain go-redis call. By default concurrent
	// decisions for one node share pipelines (see the package doc).
	NoBatch bool
	// MaxBatch is the most decisions one pipeline carries. Default
	// DefaultMaxBatch; values below 1 mean the default.
	MaxBatch int
	// Pipelines is how many round trips the batcher keeps in flight to one
	// node at once. A decision that finds fewer in flight is sent at once,
	// alone; one that finds them all busy joins the next pipeline, so the
	// pipelines grow with the concurrency. Values below 1 mean the default:
	// twice GOMAXPROCS, at least 2 (see DefaultPipelines). Either way the
	// batcher keeps no more round trips in flight than the node's client
	// has connections (goredis.Options.PoolSize).
	Pipelines int
	// Retry bounds the compare-and-set loop of the generic path
	// (store.Store.Update). The zero value means core's defaults.
	Retry store.RetryPolicy
	// OnWarning, when set, hears each *core.EvictionWarning that the
	// store's background check of the servers' maxmemory-policy finds (see
	// Store.Check): at start-up, on a new connection, and every minute.
	// It is called from a goroutine of the store's, one call at a time.
	OnWarning func(error)
	// ClockSkew is the largest disagreement between the clocks of the
	// fleet's instances. On the generic path (store.Store.Update: algorithms
	// without a Lua twin, Limiters with Config.NoScript) each instance's own
	// clock decides, while Redis expires the key by its own: a TTL measured
	// on a clock that runs ahead ends early by the clock of an instance
	// behind, which then finds the key gone while, by its clock, the state
	// still holds (a fixed window would admit a second quota in one
	// window). The generic path therefore lengthens every TTL by ClockSkew,
	// which costs only memory, and declares it (ClockSkew method) so that a
	// Limiter clamps stored times that lie further ahead than that. Zero
	// means DefaultClockSkew; negative means no allowance (one clock); more
	// than store.MaxClockSkew means that. Scripts are not affected: they set their own TTLs, on the server's
	// clock unless the Limiter injects one.
	ClockSkew time.Duration
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	switch {
	case r.ClockSkew == 0:
		r.ClockSkew = DefaultClockSkew
	case r.ClockSkew < 0:
		r.ClockSkew = 0
	}
	r.ClockSkew = min(r.ClockSkew, store.MaxClockSkew)
	if r.MaxBatch < 1 {
		r.MaxBatch = DefaultMaxBatch
	}
	if r.Pipelines < 1 {
		r.Pipelines = DefaultPipelines()
	}
	return r
}

// DefaultPipelines is Options.Pipelines when it is zero: twice GOMAXPROCS,
// and at least 2. Up to that many decisions in flight, each is its own
// round trip and waits for nothing; past it, decisions share pipelines. One
// round trip per core and a second to hide its wait is where, measured on
// the README's machine, concurrent callers stop gaining from more round
// trips and start gaining from fuller pipelines: with 2 lanes, 4 callers
// queued behind each other (0.6x a pooled go-redis client), and with as
// many lanes as connections, 64 callers sent 20 small pipelines where 4
// full ones served them faster.
func DefaultPipelines() int { return max(2, 2*runtime.GOMAXPROCS(0)) }
