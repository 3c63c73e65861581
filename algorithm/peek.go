package algorithm

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/inproc"
)

// The O(1) algorithms let an in-process store decide a refusal without its
// lock (inproc.Peeker). Each Peek is the algorithm's own Step, run on the
// copy of the state that Peek was handed: the step may write that copy in
// place, and when it returns a next state the store throws the decision
// away and decides again under its lock. So a peeked decision is Step's by
// construction, not a second implementation of the rule. The body is
// written once per type: a generic helper calls Step through its type's
// dictionary, and escape analysis then moves the copy to the heap (one
// allocation a decision); a method of the concrete type keeps it on the
// stack.
var (
	_ inproc.Peeker = GCRA{}
	_ inproc.Peeker = TokenBucket{}
	_ inproc.Peeker = FixedWindow{}
	_ inproc.Peeker = LeakyBucket{}
	_ inproc.Peeker = SlidingCounter{}
	_ inproc.Peeker = Calendar{}
)

// Peek is Step on a copy of the state, for a decision that writes nothing
// (inproc.Peeker).
func (a GCRA) Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool) {
	state, ok := peekState(w0, w1, w2, size)
	if !ok {
		return
	}
	next, _, d := a.Step(state[:size], now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, next == nil
}

// Peek is Step on a copy of the state, for a decision that writes nothing
// (inproc.Peeker).
func (a TokenBucket) Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool) {
	state, ok := peekState(w0, w1, w2, size)
	if !ok {
		return
	}
	next, _, d := a.Step(state[:size], now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, next == nil
}

// Peek is Step on a copy of the state, for a decision that writes nothing
// (inproc.Peeker).
func (a FixedWindow) Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool) {
	state, ok := peekState(w0, w1, w2, size)
	if !ok {
		return
	}
	next, _, d := a.Step(state[:size], now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, next == nil
}

// Peek is Step on a copy of the state, for a decision that writes nothing
// (inproc.Peeker).
func (a LeakyBucket) Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool) {
	state, ok := peekState(w0, w1, w2, size)
	if !ok {
		return
	}
	next, _, d := a.Step(state[:size], now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, next == nil
}

// Peek is Step on a copy of the state, for a decision that writes nothing
// (inproc.Peeker).
func (a SlidingCounter) Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool) {
	state, ok := peekState(w0, w1, w2, size)
	if !ok {
		return
	}
	next, _, d := a.Step(state[:size], now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, next == nil
}

// Peek is Step on a copy of the state, for a decision that writes nothing
// (inproc.Peeker).
func (a Calendar) Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool) {
	state, ok := peekState(w0, w1, w2, size)
	if !ok {
		return
	}
	next, _, d := a.Step(state[:size], now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, next == nil
}

// peekState lays the words out as the state's bytes, and reports whether
// size fits them.
func peekState(w0, w1, w2 uint64, size int) (b [inproc.PeekCap]byte, ok bool) {
	if size < 0 || size > len(b) {
		return b, false
	}
	binary.LittleEndian.PutUint64(b[0:], w0)
	binary.LittleEndian.PutUint64(b[8:], w1)
	binary.LittleEndian.PutUint64(b[16:], w2)
	return b, true
}
