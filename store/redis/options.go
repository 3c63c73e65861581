package redis

import "github.com/sluicehq/sluice/core"

// Defaults for Options.
const (
	// DefaultMaxBatch is the most decisions one pipeline carries.
	DefaultMaxBatch = 64
	// DefaultPipelines is how many round trips the batcher keeps in flight
	// to one node at once.
	DefaultPipelines = 2
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
	// alone; one that finds them all busy joins the next pipeline. Default
	// DefaultPipelines; values below 1 mean the default.
	Pipelines int
	// Retry bounds the compare-and-set loop of the generic path
	// (core.Store.Update). The zero value means core's defaults.
	Retry core.RetryPolicy
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxBatch < 1 {
		r.MaxBatch = DefaultMaxBatch
	}
	if r.Pipelines < 1 {
		r.Pipelines = DefaultPipelines
	}
	return r
}
