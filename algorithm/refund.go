package algorithm

import (
	"sort"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Refunds (core.Refunder): giving back units a decision charged, when a
// later check refused the request they were charged for. A refund never
// over-admits:
//
//   - fixed window, sliding counter, calendar: the units go back only into
//     the window (period) the charge was counted in, and only while it is
//     still the key's newest one; at most the units it holds;
//   - leaky bucket: the charge's place in the queue goes back, what lies
//     ahead of now of it, only while no later charge queued behind it (a
//     shaped queue keeps the starts it gave: a place handed on from the
//     middle of it would start two requests together);
//   - token bucket, GCRA: the full time (the theoretical arrival time)
//     moves back by the time of the charge that still lies ahead of now,
//     where the charge left it (the mark is that time right after the
//     charge) and also had it started at the charge's own time (a refund
//     of an earlier charge moves the later ones back, which their marks
//     do not know), never before now: tokens go back, never
//     above Burst, and only as many as the charge still withholds, for a
//     charge whose bucket has since refilled past it has less, or nothing,
//     to give back; the units reported are that time rounded up to whole
//     intervals;
//   - sliding log: up to n of the entries of the charge's instant are
//     removed, while they are in the trailing window (the Lua twin lowers
//     that instant's member, and the running sums of the members after
//     it);
//
// so the state after a refund admits no more than it would had the
// refunded charge never happened: a refund of an old charge never lets
// more than the quota through at one instant. Every refund has its Lua
// twin in lua/refund.lua.

var (
	_ core.Refunder = FixedWindow{}
	_ core.Refunder = SlidingCounter{}
	_ core.Refunder = TokenBucket{}
	_ core.Refunder = GCRA{}
	_ core.Refunder = LeakyBucket{}
	_ core.Remarker = LeakyBucket{}
	_ core.Refunder = Calendar{}
	_ core.Refunder = SlidingLog{}
)

// Refund gives back up to n units charged at at, if at's window is still
// the key's window and has not ended.
func (FixedWindow) Refund(state []byte, now, at, _, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	w := p.WindowMicros()
	now, at = winClamp(now), winClamp(at)
	last, used, ok := fwDecode(state)
	if !ok || n < 1 {
		return nil, 0, 0
	}
	start := last - last%w
	if at-at%w != start || now >= start+w || used == 0 {
		return nil, 0, 0
	}
	r := min(n, used)
	return fwEncode(state, last, used-r), core.Micros(max(start+w-now, 1)), r
}

// Refund gives back up to n units charged at at into the current count,
// if at's window is the state's newest window and is not yet past being
// the previous one.
func (SlidingCounter) Refund(state []byte, now, at, _, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	w := p.WindowMicros()
	now, at = winClamp(now), winClamp(at)
	last, prev, cur, ok := scDecode(state)
	if !ok || n < 1 {
		return nil, 0, 0
	}
	start := last - last%w
	if at-at%w != start || now >= start+2*w || cur == 0 {
		return nil, 0, 0
	}
	r := min(n, cur)
	return scEncode(state, last, prev, cur-r), core.Micros(max(start+2*w-now, 1)), r
}

// Refund moves the full time back by the time of the charge that still
// lies ahead of now (mark is the full time right after the charge; see
// timedRefund), never before now: up to n tokens back, never above Burst,
// and no more than the charge still withholds.
func (TokenBucket) Refund(state []byte, now, at, mark, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	return timedRefund(state, now, at, mark, n, p, tbDecode, tbEncode)
}

// Mark is the full time right after the charge.
func (TokenBucket) Mark(d core.Decision, at int64, _ *core.Policy) int64 {
	return at + int64(d.ResetAfter/time.Microsecond)
}

// Refund moves the theoretical arrival time back by the time of the
// charge that still lies ahead of now (mark is the TAT right after the
// charge; see timedRefund), never before now.
func (GCRA) Refund(state []byte, now, at, mark, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	next, ttl, r := timedRefund(state, now, at, mark, n, p, gcraDecode, gcraEncode)
	return next, ttl, r
}

// Mark is the TAT right after the charge.
func (GCRA) Mark(d core.Decision, at int64, _ *core.Policy) int64 {
	return at + int64(d.ResetAfter/time.Microsecond)
}

// Refund gives a charge's place in the queue back, whole, but only while
// no later charge queued behind it: the drain time is still within an
// interval of the mark (the drain right after the charge, less at most M
// mod T). The queue is shaped: each admitted request starts at the time
// its Delay said, one interval after the one before it. A place with
// requests queued behind it cannot go back: a new request would be given
// it while they keep the starts they were given, and two would start
// together. Such a refund gives back nothing (the place stays empty, as
// when its request had started and ended at once). The drain time moves
// back by what lies ahead of now of the place, never before now, and the
// units reported are that time in intervals, rounded up. Since no later
// charge can be refunded while this one is queued under it, the drain
// holds exactly the charge's place, and no further bound is needed (see
// timedRefund for the other buckets').
func (LeakyBucket) Refund(state []byte, now, _, mark, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	t := p.IntervalMicros()
	now = bkClamp(now)
	drain, ok := lbDecode(state)
	if !ok || drain <= now || n < 1 || mark <= now || drain-mark >= t {
		return nil, 0, 0
	}
	x := min(n*t, mark-now, drain-now)
	if x <= 0 {
		return nil, 0, 0
	}
	drain -= x
	return lbEncode(state, drain), core.Micros(max(drain-now, 1)), (x + t - 1) / t
}

// Remark is the mark of what is left of a charge after k of its units
// were refunded (core.Remarker): its place ends k intervals earlier, so a
// charge that queued behind the rest is seen.
func (LeakyBucket) Remark(mark, k int64, p *core.Policy) int64 {
	return mark - k*p.IntervalMicros()
}

// Mark is the drain time right after the charge, exactly: ResetAfter
// leaves out MaxDelay mod Interval, which an admission's drain always
// exceeds (it is at least one interval ahead of now), so it is added back.
// With a lower mark the refund of a place would give back only part of it.
func (LeakyBucket) Mark(d core.Decision, at int64, p *core.Policy) int64 {
	return at + int64(d.ResetAfter/time.Microsecond) + p.MaxDelayMicros()%max(p.IntervalMicros(), 1)
}

// timedRefund moves the stored time tt back by x, the time of the charge
// that the key still owes: at most the charge's n intervals, what lies
// ahead of now of them where the charge left them (mark), and what lies
// ahead of now of them had they started at the charge's own time at. The
// last bound holds whatever was refunded since: a refund of an earlier
// charge moves the later ones back, and their marks do not know it, but
// never to before at (each refund stops at its now, which is after at).
// So x never exceeds what the charge still withholds, and a refund never
// gives back units that the refill restored and another charge took. The
// units reported are x in intervals, rounded up: a refund made δ after its
// charge gives back its last unit δ later.
func timedRefund(state []byte, now, at, mark, n int64, p *core.Policy, dec func([]byte) (int64, bool), enc func([]byte, int64) []byte) ([]byte, time.Duration, int64) {
	t := p.IntervalMicros()
	now, at = bkClamp(now), bkClamp(at)
	tt, ok := dec(state)
	if !ok || tt <= now || n < 1 || mark <= now {
		return nil, 0, 0
	}
	x := min(n*t, mark-now, tt-now, at+n*t-now)
	if x <= 0 {
		return nil, 0, 0
	}
	tt -= x
	return enc(state, tt), core.Micros(max(tt-now, 1)), (x + t - 1) / t
}

// Mark is 0: a window's refund needs only the charge's time.
func (FixedWindow) Mark(core.Decision, int64, *core.Policy) int64 { return 0 }

// Mark is 0: a window's refund needs only the charge's time.
func (SlidingCounter) Mark(core.Decision, int64, *core.Policy) int64 { return 0 }

// Mark is 0: a period's refund needs only the charge's time.
func (Calendar) Mark(core.Decision, int64, *core.Policy) int64 { return 0 }

// Refund gives back up to n units charged at at, if at's period is still
// the key's period and has not ended.
func (c Calendar) Refund(state []byte, now, at, _, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	now, at = min(max(now, 0), bkMaxNow), min(max(at, 0), bkMaxNow)
	s, u, ok := calDecode(state)
	if !ok || n < 1 || u == 0 {
		return nil, 0, 0
	}
	_, start, stop, _ := c.Bounds(at)
	if s != start || now >= stop {
		return nil, 0, 0
	}
	r := min(n, u)
	return calEncode(state, s, u-r), core.Micros(max(stop-now, 1)), r
}

// The refund script: lua/refund.lua after the prelude. One script for
// every set of limits, as the multi-limit script is.
var refundScript = loadScript("refund")

// RefundScript returns the multi-limit refund script.
func RefundScript() *store.Script { return refundScript }

// MultiRefundScript is the refund script.
func (FixedWindow) MultiRefundScript() *store.Script { return refundScript }

// MultiRefundScript is the refund script.
func (TokenBucket) MultiRefundScript() *store.Script { return refundScript }

// MultiRefundScript is the refund script.
func (GCRA) MultiRefundScript() *store.Script { return refundScript }

// MultiRefundScript is the refund script.
func (LeakyBucket) MultiRefundScript() *store.Script { return refundScript }

// MultiRefundScript is the refund script.
func (Calendar) MultiRefundScript() *store.Script { return refundScript }

// Refund removes up to n of the entries the charge at at added (the units
// admitted at that instant), while they are still in the trailing window.
// Entries of one instant are alike, so removing n of them is removing the
// charge's own.
func (SlidingLog) Refund(state []byte, now, at, _, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	w := p.WindowMicros()
	now, at = winClamp(now), winClamp(at)
	entries, ok := slEntries(state)
	k := len(entries) / 8
	if !ok || k == 0 || n < 1 {
		return nil, 0, 0
	}
	last := slAt(entries, k-1)
	eff := max(now, last)
	if at <= eff-w || at > last {
		return nil, 0, 0
	}
	lo := sort.Search(k, func(i int) bool { return slAt(entries, i) >= at })
	hi := sort.Search(k, func(i int) bool { return slAt(entries, i) > at })
	r := min(n, int64(hi-lo))
	if r <= 0 {
		return nil, 0, 0
	}
	// Drop r entries of the instant: the rest moves down over them.
	b := append(state[:1+8*(hi-int(r))], entries[8*hi:]...)
	ttl := max(eff+w-now, 1)
	if len(b) > 1 {
		ttl = max(slAt(b[1:], (len(b)-1)/8-1)+w-now, 1)
	}
	return b, core.Micros(ttl), r
}

// Mark is 0: the log's refund needs only the charge's time.
func (SlidingLog) Mark(core.Decision, int64, *core.Policy) int64 { return 0 }

// MultiRefundScript is the refund script.
func (SlidingLog) MultiRefundScript() *store.Script { return refundScript }

// MultiRefundScript is the refund script.
func (SlidingCounter) MultiRefundScript() *store.Script { return refundScript }
