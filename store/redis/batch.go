package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/store"
)

// batcher coalesces concurrent script calls for one node into pipelines.
//
// A call that finds fewer than lanes round trips in flight takes a lane and
// sends its command at once, alone, from its own goroutine, under its own
// context: a lone caller pays nothing for the batcher. A call that finds
// every lane busy joins the queue. When a lane's round trip ends and the
// queue holds calls, the lane passes to a worker goroutine that sends them,
// up to max at a time, as one pipeline, and keeps the lane while calls keep
// queueing. The queue is therefore non-empty only while every lane is busy.
//
// Each queued call waits for its batch or for its own context, whichever
// ends first. A call that leaves before a worker took it was never sent; one
// that leaves after has an unknown outcome. Nothing here re-sends anything:
// a command runs at most once, in the one pipeline that took it.
type batcher struct {
	s     *Store
	max   int
	lanes int

	mu    sync.Mutex
	busy  int     // lanes in use
	queue []*call // FIFO; abandoned calls wait here until take skips them
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
	return &batcher{s: s, max: s.opts.MaxBatch, lanes: lanes}
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
// reused, as the queue or a batch still refers to it.
func (b *batcher) do(ctx context.Context, c *call) (err error, held bool) {
	b.mu.Lock()
	if b.busy < b.lanes {
		b.busy++
		b.mu.Unlock()
		err = b.s.client.Process(ctx, c.cmd)
		b.release()
		return err, false
	}
	c.state = callQueued
	c.deadline, _ = ctx.Deadline()
	b.queue = append(b.queue, c)
	b.mu.Unlock()

	select {
	case <-c.ready:
		return c.cmd.Err(), false
	case <-ctx.Done():
	}
	b.mu.Lock()
	st := c.state
	if st == callQueued {
		c.state = callAbandoned
	}
	b.mu.Unlock()
	if st == callQueued {
		return &store.Error{Op: "script", Err: ctx.Err()}, true
	}
	select {
	case <-c.ready: // the batch finished as the deadline came
		return c.cmd.Err(), false
	default:
		return store.UnknownOutcome(&store.Error{Op: "script", Err: ctx.Err()}), true
	}
}

// release ends a caller's own round trip: its lane goes to a worker if calls
// are queued, and is freed otherwise.
func (b *batcher) release() {
	b.mu.Lock()
	batch := b.take(nil)
	if len(batch) == 0 {
		b.busy--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	go b.work(batch)
}

// take moves up to max queued calls into dst, skipping abandoned ones.
// b.mu must be held.
func (b *batcher) take(dst []*call) []*call {
	q := b.queue
	i := 0
	for ; i < len(q) && len(dst) < b.max; i++ {
		if q[i].state == callQueued {
			q[i].state = callTaken
			dst = append(dst, q[i])
		}
	}
	n := copy(q, q[i:])
	clear(q[n:])
	b.queue = q[:n]
	return dst
}

// work sends batches on one lane until the queue is empty.
func (b *batcher) work(batch []*call) {
	for {
		b.send(batch)
		b.mu.Lock()
		batch = b.take(batch[:0])
		if len(batch) == 0 {
			b.busy--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// send runs one batch and wakes its callers. The round trip's deadline is
// the latest of its callers' (none if one has none), so that no caller is
// cut short by another's deadline; each caller still leaves at its own.
func (b *batcher) send(batch []*call) {
	ctx := context.Background()
	var latest time.Time
	for _, c := range batch {
		if c.deadline.IsZero() {
			latest = time.Time{}
			break
		}
		if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	cancel := context.CancelFunc(func() {})
	if !latest.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, latest)
	}
	if len(batch) == 1 {
		_ = b.s.client.Process(ctx, batch[0].cmd)
	} else {
		pipe := b.s.client.Pipeline()
		for _, c := range batch {
			_ = pipe.Process(ctx, c.cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	cancel()
	for _, c := range batch {
		c.ready <- struct{}{}
	}
}
