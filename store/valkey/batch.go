package valkey

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// batcher coalesces the commands that share a standalone client's pipeline
// into DoMulti batches. valkey-go's writer flushes its connection whenever
// it finds no command waiting, so many callers each sending one command
// made it flush once or twice a command: at 64 goroutines, write syscalls
// were 73% of the client's CPU, on cores it shares with the server. A batch
// goes into the pipeline as one write.
//
// A command that finds fewer than lanes batches in flight takes a lane and
// goes alone, at once, from its caller's goroutine (valkey-go's pipeline
// still carries it beside the others). One that finds every lane busy
// joins the queue, and when a lane's command or batch comes back while the
// queue holds commands, the lane passes to a worker goroutine that sends
// them, up to max at a time, as one DoMulti, and keeps the lane while
// commands keep queueing. So the queue is non-empty only while every lane
// is busy, and a batch holds what came while the last one was out.
//
// Each queued command waits for its batch or for its own context,
// whichever ends first. One that leaves before a worker took it was never
// sent (its outcome is known: nothing happened); one that leaves after has
// an unknown outcome. Nothing here re-sends anything: a command runs at
// most once, in the one batch that took it.
type batcher struct {
	c     valkeygo.Client
	lanes int
	max   int

	mu    sync.Mutex
	busy  int
	queue []*vcall
}

// vcall is one queued command. Calls are pooled.
type vcall struct {
	cmd      valkeygo.Completed
	resp     valkeygo.ValkeyResult
	state    uint8 // callQueued, callTaken or callAbandoned (by its caller or by take); guarded by batcher.mu
	deadline time.Time
	ready    chan struct{} // receives once the batch that took the call is done
}

const (
	callQueued = iota + 1
	callTaken
	callAbandoned
)

var vcallPool = sync.Pool{New: func() any { return &vcall{ready: make(chan struct{}, 1)} }}

// batchLanes is how many commands or batches the batcher keeps in flight
// on the pipeline; batchMax is the most commands one batch carries.
const (
	batchLanes = 2
	batchMax   = 64
)

func newBatcher(c valkeygo.Client) *batcher {
	return &batcher{c: c, lanes: batchLanes, max: batchMax}
}

// do sends cmd and returns its reply. A non-nil error is the batcher's own:
// ctx ended while cmd waited, before a batch took it (nothing was sent) or
// after (an unknown outcome).
func (b *batcher) do(ctx context.Context, cmd valkeygo.Completed) (valkeygo.ValkeyResult, error) {
	b.mu.Lock()
	if b.busy < b.lanes {
		b.busy++
		b.mu.Unlock()
		resp := b.c.Do(ctx, cmd)
		b.release()
		return resp, nil
	}
	c := vcallPool.Get().(*vcall)
	c.cmd, c.state = cmd, callQueued
	c.deadline, _ = ctx.Deadline()
	b.queue = append(b.queue, c)
	b.mu.Unlock()

	select {
	case <-c.ready:
		return c.done(), nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	st := c.state
	if st == callQueued {
		c.state = callAbandoned
	}
	b.mu.Unlock()
	if st != callTaken { // take skips it, and it goes to the collector
		return valkeygo.ValkeyResult{}, &store.Error{Op: "script", Err: ctx.Err()}
	}
	select {
	case <-c.ready: // the batch finished as the deadline came
		return c.done(), nil
	default: // the batch still holds c: left to the collector
		return valkeygo.ValkeyResult{}, store.UnknownOutcome(&store.Error{Op: "script", Err: ctx.Err()})
	}
}

// done returns c's reply and c to the pool.
func (c *vcall) done() valkeygo.ValkeyResult {
	resp := c.resp
	*c = vcall{ready: c.ready}
	vcallPool.Put(c)
	return resp
}

// release ends a caller's own command: its lane goes to a worker if
// commands are queued, and is freed otherwise.
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

// take moves up to max queued calls into dst, skipping abandoned ones, and
// abandons those whose deadline has passed: their callers are leaving, and
// return them unsent. b.mu must be held.
func (b *batcher) take(dst []*vcall) []*vcall {
	q := b.queue
	var now time.Time
	if len(q) > 0 {
		now = time.Now()
	}
	i := 0
	for ; i < len(q) && len(dst) < b.max; i++ {
		switch c := q[i]; {
		case c.state != callQueued:
		case !c.deadline.IsZero() && !now.Before(c.deadline):
			c.state = callAbandoned
		default:
			c.state = callTaken
			dst = append(dst, c)
		}
	}
	n := copy(q, q[i:])
	clear(q[n:])
	b.queue = q[:n]
	return dst
}

// work sends batches on one lane until the queue is empty.
func (b *batcher) work(batch []*vcall) {
	cmds := make([]valkeygo.Completed, 0, b.max)
	for {
		b.send(batch, cmds[:0])
		b.mu.Lock()
		clear(batch)
		batch = b.take(batch[:0])
		if len(batch) == 0 {
			b.busy--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// send runs one batch and wakes its callers. The batch's deadline is the
// latest of its callers' (none if one has none), so that no caller is cut
// short by another's deadline; each caller still leaves at its own.
func (b *batcher) send(batch []*vcall, cmds []valkeygo.Completed) {
	ctx := context.Background()
	var latest time.Time
	unbounded := false
	for _, c := range batch {
		cmds = append(cmds, c.cmd)
		if c.deadline.IsZero() {
			unbounded = true
		} else if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	cancel := context.CancelFunc(func() {})
	if !unbounded {
		ctx, cancel = context.WithDeadline(ctx, latest)
	}
	if len(cmds) == 1 {
		batch[0].resp = b.c.Do(ctx, cmds[0])
	} else {
		for i, resp := range b.c.DoMulti(ctx, cmds...) {
			batch[i].resp = resp
		}
	}
	cancel()
	for _, c := range batch {
		c.ready <- struct{}{}
	}
	clear(cmds)
}
