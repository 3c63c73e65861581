package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/store"
)

// batcher coalesces concurrent script calls for one node into pipelines
// (internal/batch): a call that finds a lane free is sent alone, with
// Client.Process under its own context; the calls that queue behind busy
// lanes go as one pipeline, up to Options.MaxBatch of them. Nothing here
// re-sends anything: a command runs at most once, alone or in the one
// pipeline that took it.
type batcher struct {
	b *batch.Batcher[call]
}

// newBatcher returns the batcher of one node, whose client has poolSize
// connections (0: unknown). It keeps at most Options.Pipelines round trips
// in flight, and never more than the connections: a lane beyond them would
// only wait in the client's pool for one to come free, while its calls
// could have joined a pipeline.
func newBatcher(s *Store, poolSize int) *batcher {
	lanes := s.opts.Pipelines
	if poolSize > 0 {
		lanes = min(lanes, poolSize)
	}
	one := func(ctx context.Context, c *call) { c.err = s.client.Process(ctx, c.cmd) }
	many := func(ctx context.Context, cs []*call) {
		if len(cs) == 1 {
			one(ctx, cs[0])
			return
		}
		pipe := s.client.Pipeline()
		for _, c := range cs {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx)
		for _, c := range cs {
			c.err = c.cmd.Err()
		}
	}
	return &batcher{b: batch.New(lanes, s.opts.MaxBatch, func(c *call) *batch.Call { return &c.bc }, one, many)}
}

// poolSize is how many connections c keeps to one node, or 0 when its type
// does not say.
func poolSize(c goredis.UniversalClient) int {
	if c, ok := c.(*goredis.Client); ok {
		return c.Options().PoolSize
	}
	return 0
}

// do runs c's command and returns its error. When ctx ends while c waits,
// do returns a finished store error and held true: c must then not be
// reused, as the queue or a batch may still refer to it.
func (b *batcher) do(ctx context.Context, c *call) (err error, held bool) {
	switch b.b.Do(ctx, c) {
	case batch.Sent:
		return c.err, false
	case batch.NotSent:
		return &store.Error{Op: "script", Err: ctx.Err()}, true
	default:
		return &store.Error{Op: "script", Err: store.UnknownOutcome(ctx.Err())}, true
	}
}
