package memory

import (
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Defaults for the fields of Options.
const (
	DefaultMaxKeys       = 1_000_000
	DefaultShards        = 256
	DefaultSweepInterval = time.Minute
	// MinSweepInterval is the shortest Options.SweepInterval: a shorter
	// positive one is raised to it.
	MinSweepInterval = time.Millisecond
	// MaxShards caps Options.Shards.
	MaxShards = 1 << 16
	// minKeysPerShard is the least share of MaxKeys a shard is given (when
	// MaxKeys allows more than one shard): an eviction chooses the key that
	// expires first among a few of its shard's, and a shard of one key has
	// no choice (a drained identity's key, which a flood of fresh keys
	// should evict last, would go with the next of them).
	minKeysPerShard = 16
)

// Options configures a Store. A nil *Options means all defaults.
type Options struct {
	// MaxKeys bounds the number of keys held. It is split evenly across the
	// shards, and a shard that holds its share evicts a key, the one that
	// expires first among a few, to make room for a new one (see the
	// package doc), so the store may evict a little before it holds
	// MaxKeys in all. Zero or negative means DefaultMaxKeys (1,000,000).
	MaxKeys int
	// Shards is the number of independently locked parts of the store,
	// rounded up to a power of two and capped at MaxShards; it is lowered
	// (halved) until each shard's share of MaxKeys is at least 16 keys, so
	// that an eviction has keys to choose among. More shards mean less contention
	// between keys and shorter sweeps of each shard. Zero or negative means
	// DefaultShards (256).
	Shards int
	// SweepInterval is how often the background sweeper deletes expired
	// keys, at least MinSweepInterval (1 ms). Zero means
	// DefaultSweepInterval (1 minute); negative means no sweeper (expired keys then still read as absent, and are deleted as
	// new keys arrive in their shard, or by Sweep).
	SweepInterval time.Duration
	// Clock is read by sweeps, Len, and updates whose mutation carries no
	// time (a Limiter's always does: see the package doc). It must be the
	// clock of the Limiters that use the store. Nil (also a nil pointer in
	// the interface) means core.SystemClock.
	Clock core.Clock
}

// config is Options with the defaults filled in.
type config struct {
	maxKeys int
	shards  int
	sweep   time.Duration
	clock   core.Clock // nil for the system clock's fast path
}

func (o *Options) config() config {
	var c config
	if o != nil {
		c = config{maxKeys: o.MaxKeys, shards: o.Shards, sweep: o.SweepInterval, clock: o.Clock}
	}
	if c.maxKeys <= 0 {
		c.maxKeys = DefaultMaxKeys
	}
	if c.shards <= 0 {
		c.shards = DefaultShards
	}
	if c.shards > MaxShards {
		c.shards = MaxShards
	}
	c.shards = 1 << bits.Len(uint(c.shards-1))
	for c.shards > 1 && c.shards*minKeysPerShard > c.maxKeys {
		c.shards >>= 1
	}
	if c.sweep == 0 {
		c.sweep = DefaultSweepInterval
	}
	if c.sweep > 0 && c.sweep < MinSweepInterval {
		c.sweep = MinSweepInterval
	}
	if _, ok := c.clock.(core.SystemClock); ok || store.IsNil(c.clock) {
		c.clock = nil
	}
	return c
}
