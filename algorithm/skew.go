package algorithm

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/core"
)

// Clamps (core.Clamper). Every step reads a stored time later than now as
// standing still at it (or, for the token bucket, GCRA and the leaky
// bucket, as a debt still owed), which keeps the decisions of a key on one
// time line when clocks disagree a little. A clock far ahead would hold
// that line in its future: every correct instance stands still until real
// time catches up. A Limiter over a store that declares its clock skew s
// therefore clamps each state before the step: a stored time more than s
// beyond the latest that a step at now could write (now for an admission
// time, now + B·T for a TAT, ...) is pulled back to that bound, as if its
// writer had been s ahead. The bound is always below the time it replaces,
// so a clamped state decodes as the step's own, and no sum leaves the
// range each step's overflow note states (s is at most 2^53 µs, the
// longest time.Duration).
//
// Each type's doc states what the clamp costs and bounds for a fleet with
// one instance off by X.

var (
	_ core.Clamper = FixedWindow{}
	_ core.Clamper = SlidingLog{}
	_ core.Clamper = SlidingCounter{}
	_ core.Clamper = TokenBucket{}
	_ core.Clamper = GCRA{}
	_ core.Clamper = LeakyBucket{}
	_ core.Clamper = Concurrency{}
)

// Clamp pulls the newest admission time back to now + skew (core.Clamper);
// the count stays, in the window of the clamped time.
func (FixedWindow) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	now = winClamp(now)
	last, _, ok := fwDecode(state)
	if !ok || last <= now+skew {
		return state, 0, false
	}
	last = now + skew
	binary.BigEndian.PutUint64(state[1:], uint64(last))
	w := p.WindowMicros()
	return state, core.Micros(last - last%w + w - now), true
}

// Clamp pulls the newest admission time back to now + skew (core.Clamper);
// both counts stay, in the windows of the clamped time.
func (SlidingCounter) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	now = winClamp(now)
	last, _, _, ok := scDecode(state)
	if !ok || last <= now+skew {
		return state, 0, false
	}
	last = now + skew
	binary.BigEndian.PutUint64(state[1:], uint64(last))
	w := p.WindowMicros()
	return state, core.Micros(last - last%w + 2*w - now), true
}

// Clamp pulls every entry later than now + skew back to it (core.Clamper):
// each unit stays counted, and leaves the window W after the clamped time.
func (SlidingLog) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	now = winClamp(now)
	entries, ok := slEntries(state)
	k := len(entries) / 8
	bound := now + skew
	if !ok || k == 0 || slAt(entries, k-1) <= bound {
		return state, 0, false
	}
	// Entries are sorted: the late ones are a suffix, and clamping them all
	// to one time keeps the log sorted.
	for i := k - 1; i >= 0 && slAt(entries, i) > bound; i-- {
		binary.BigEndian.PutUint64(entries[8*i:], uint64(bound))
	}
	return state, core.Micros(bound + p.WindowMicros() - now), true
}

// Clamp pulls the full time back to now + B·T + skew (core.Clamper): a
// bucket drained as by a clock skew ahead. The full time alone cannot tell
// how many tokens the far clock took, so the clamp assumes all of them.
func (TokenBucket) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	return tatClamp(state, tbVersion, now, skew, p)
}

// Clamp pulls TAT back to now + B·T + skew (core.Clamper): a drained bucket
// as a clock skew ahead would leave it. TAT alone cannot tell how much of
// it the far clock's admissions owe, so the clamp assumes all of it.
func (GCRA) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	return tatClamp(state, gcraVersion, now, skew, p)
}

// tatClamp is the clamp of a state of one time of version v (tatStep's).
func tatClamp(state []byte, v byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	now = bkClamp(now)
	t, ok := tatDecode(state, v)
	bound := now + p.Capacity()*p.IntervalMicros() + skew
	if !ok || t <= bound {
		return state, 0, false
	}
	binary.BigEndian.PutUint64(state[1:], uint64(bound))
	return state, core.Micros(bound - now), true
}

// Clamp pulls drain back to now + B·T + MaxDelay + skew (core.Clamper): a
// full queue as a clock skew ahead would leave it.
func (LeakyBucket) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	now = bkClamp(now)
	drain, ok := lbDecode(state)
	bound := now + p.Capacity()*p.IntervalMicros() + p.MaxDelayMicros() + skew
	if !ok || drain <= bound {
		return state, 0, false
	}
	binary.BigEndian.PutUint64(state[1:], uint64(bound))
	return state, core.Micros(bound - now), true
}

// Clamp pulls every lease expiry later than now + LeaseTTL + skew back to
// it (core.Clamper): each lease stays held, and is reclaimed at most
// LeaseTTL + skew after now.
func (Concurrency) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	now = bkClamp(now)
	count, ok := ccDecode(state)
	bound := now + p.LeaseTTLMicros() + skew
	if !ok || count == 0 || ccExpiry(state, count-1) <= bound {
		return state, 0, false
	}
	// Sorted by expiry: the late ones are a suffix, and one expiry for all
	// of them keeps the list sorted.
	for i := count - 1; i >= 0 && ccExpiry(state, i) > bound; i-- {
		binary.BigEndian.PutUint64(state[1+i*ccEntry:], uint64(bound))
	}
	return state, core.Micros(bound - now), true
}
