// Package batch coalesces concurrent calls to one server into batches: the
// lanes and the queue of the Redis and Valkey stores' batchers, which
// differ only in how they send one command and how they send several.
//
// A call that finds fewer than lanes round trips in flight takes a lane and
// is sent at once, alone, from its own goroutine, under its own context: a
// lone caller pays nothing for the batcher. A call that finds every lane
// busy joins the queue. When a lane's round trip ends and the queue holds
// calls, the lane passes to a worker goroutine that sends them, up to max
// at a time, as one batch, and keeps the lane while calls keep queueing.
// The queue is therefore non-empty only while every lane is busy, and a
// batch holds what came while the round trips before it were out.
//
// Each queued call waits for its batch or for its own context, whichever
// ends first. A call that leaves before a worker took it was never sent; so
// is one whose deadline had passed when a worker came to it, which the
// worker leaves out. One that leaves after a worker took it has an unknown
// outcome. Nothing here sends anything twice: a call goes out at most once,
// alone or in the one batch that took it.
package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Call is the batcher's part of a caller's call: the caller's type embeds
// or holds one, made by NewCall, and hands it out through the func given to
// New.
type Call struct {
	state    uint8 // queued, taken or abandoned; guarded by Batcher.mu
	deadline time.Time
	ready    chan struct{} // receives once the batch that took the call is done
}

const (
	queued = iota + 1
	taken
	abandoned // by its caller, or by take once its deadline passed
)

// NewCall returns a Call ready for use, and for reuse after Reset.
func NewCall() Call { return Call{ready: make(chan struct{}, 1)} }

// Reset readies c for another call. Only a call whose Do returned Sent may
// be reset and reused.
func (c *Call) Reset() { c.state, c.deadline = 0, time.Time{} }

// Outcome is how Do ended.
type Outcome uint8

const (
	// Sent: the call went out, alone or in a batch, and its reply (or the
	// error of its round trip) is in the caller's call.
	Sent Outcome = iota
	// NotSent: ctx ended before any batch took the call; nothing was sent.
	NotSent
	// Held: ctx ended while a batch held the call, so the outcome is
	// unknown.
	Held
)

// Batcher keeps at most lanes round trips in flight to one server, and
// batches of at most max calls. T is the caller's call type.
type Batcher[T any] struct {
	lanes, max int
	call       func(*T) *Call
	one        func(context.Context, *T)
	many       func(context.Context, []*T)

	mu    sync.Mutex
	busy  int  // lanes in use
	queue []*T // FIFO; abandoned calls wait here until take skips them

	batches atomic.Int64 // sent so far
}

// New returns a Batcher of lanes round trips and batches of max calls
// (both at least 1). call returns a T's Call; one sends a call alone,
// under its caller's context; many sends a batch of one or more calls
// under a context with the latest of their deadlines (none if one has
// none), so that no caller is cut short by another's deadline. Both return
// when the round trip is over, with every call's reply or error in the
// call.
func New[T any](lanes, max int, call func(*T) *Call, one func(context.Context, *T), many func(context.Context, []*T)) *Batcher[T] {
	return &Batcher[T]{lanes: lanes, max: max, call: call, one: one, many: many}
}

// Do sends c, alone or in a batch. After NotSent or Held, c must not be
// reused: the queue or a batch may still refer to it.
func (b *Batcher[T]) Do(ctx context.Context, c *T) Outcome {
	b.mu.Lock()
	if b.busy < b.lanes {
		b.busy++
		b.mu.Unlock()
		b.one(ctx, c)
		b.release()
		return Sent
	}
	bc := b.call(c)
	bc.state = queued
	bc.deadline, _ = ctx.Deadline()
	b.queue = append(b.queue, c)
	b.mu.Unlock()

	select {
	case <-bc.ready:
		return Sent
	case <-ctx.Done():
	}
	b.mu.Lock()
	st := bc.state
	if st == queued {
		bc.state = abandoned
	}
	b.mu.Unlock()
	if st != taken {
		return NotSent
	}
	select {
	case <-bc.ready: // the batch finished as the deadline came
		return Sent
	default:
		return Held
	}
}

// Lanes returns how many round trips b keeps in flight at most.
func (b *Batcher[T]) Lanes() int { return b.lanes }

// Busy returns how many lanes are in use and how many calls wait, for
// tests.
func (b *Batcher[T]) Busy() (lanes, queued int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy, len(b.queue)
}

// Batches returns how many batches b has sent (not counting calls sent
// alone), for tests and diagnostics.
func (b *Batcher[T]) Batches() int64 { return b.batches.Load() }

// release ends a caller's own round trip: its lane goes to a worker if
// calls are queued, and is freed otherwise.
func (b *Batcher[T]) release() {
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
func (b *Batcher[T]) take(dst []*T) []*T {
	q := b.queue
	var now time.Time
	if len(q) > 0 {
		now = time.Now()
	}
	i := 0
	for ; i < len(q) && len(dst) < b.max; i++ {
		switch c := b.call(q[i]); {
		case c.state != queued:
		case !c.deadline.IsZero() && !now.Before(c.deadline):
			c.state = abandoned
		default:
			c.state = taken
			dst = append(dst, q[i])
		}
	}
	n := copy(q, q[i:])
	clear(q[n:])
	b.queue = q[:n]
	return dst
}

// work sends batches on one lane until the queue is empty.
func (b *Batcher[T]) work(batch []*T) {
	for {
		b.send(batch)
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

// send runs one batch, under the latest of its callers' deadlines, and
// wakes its callers.
func (b *Batcher[T]) send(batch []*T) {
	ctx := context.Background()
	var latest time.Time
	unbounded := false
	for _, c := range batch {
		switch d := b.call(c).deadline; {
		case d.IsZero():
			unbounded = true
		case d.After(latest):
			latest = d
		}
	}
	if !unbounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	b.batches.Add(1)
	b.many(ctx, batch)
	for _, c := range batch {
		b.call(c).ready <- struct{}{}
	}
}
