package algorithm

import (
	"encoding/binary"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// SlidingCounter approximates a sliding window with two counters: the units
// admitted in the previous aligned window (prev) and in the current one
// (cur). At elapsed µs into the current window it estimates the units in the
// trailing window as
//
//	prev·(W−elapsed)/W + cur
//
// and admits n units when the estimate plus n is at most Limit. The
// comparison is exact, in integers: the estimate is rounded up, which is the
// same test because Limit − cur − n is an integer.
//
// Bound: at most Limit units in every aligned window [kW, (k+1)W), and at
// most 2·Limit − ⌈2·Limit/W⌉ units (W in µs) in any trailing window
// (t−W, t]: just under 2·Limit, reached by Limit units in the last µs of one
// window and Limit − ⌈2·Limit/W⌉ units 2 µs before the end of the next. With
// Limit = 1 that is 1: a unit in one window blocks the whole next one.
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, the bounds hold over the keys' time line,
// whose windows real time sees up to X early or late. With X > s the
// correct instances meet their whole Limit again within s + 2·W of their
// first decision after the off instance's write (its counts are kept in the
// windows of their now + s); each handoff between the two time lines (a
// decision of one just after a write of the other) may age the counts by a
// window or two: at most one Limit more per handoff.
//
// Memory per key: the Go state is 17 bytes (a version byte, the newest
// admission time, prev, cur). The Lua twin keeps all that the step's
// decisions read of it: the start of the newest admission's window, prev,
// cur, and ⌊prev·elapsed/W⌋ at that admission (see lua/sliding-counter.lua).
// While prev and cur are below R = ⌊∛(1000·W)⌋, W in µs (R is 100 for 1 ms,
// 1000 for 1 s, 3914 for 1 min, 15326 for 1 h), and so always when Limit is
// below R, that is one Redis integer: MEMORY USAGE on Redis 7.0 is 72 bytes
// with a key of up to 30 bytes (the default prefix and a policy name of up
// to 4 characters), 88 with one of 31 to 44 (names of 5 to 18). Past R it
// is a string "<µs>:<prev>:<cur>" of at most 38 bytes: 120 bytes with a key
// of 31 to 44 bytes while the two counts have at most ten digits between
// them, 136 beyond. A key of up to 30 bytes takes 16 bytes from each
// figure, one of 45 to 60 adds 16.
//
// The twin decides exactly as Step for every sequence of calls under one
// Window, whatever the Limit of each. A key written under another Window (a
// policy reconfigured under the same name) is read otherwise than by Step,
// since the twin keeps a window and not an instant: as counts in a window
// near the time it was written, never as a wait longer than the old window
// and twice the new one.
//
// A denial writes nothing. SlidingCounter has no fields and is safe for
// concurrent use.
type SlidingCounter struct{}

var (
	_ core.Algorithm = SlidingCounter{}
	_ core.Scripted  = SlidingCounter{}
)

var slidingCounterScript = loadScript("sliding-counter")

// Name returns "sliding-counter".
func (SlidingCounter) Name() string { return "sliding-counter" }

// Quota returns p.Limit: a fresh key admits Limit units at once.
func (SlidingCounter) Quota(p *core.Policy) int64 { return p.Limit }

// Script returns the Lua twin, lua/sliding-counter.lua.
func (SlidingCounter) Script() *store.Script { return slidingCounterScript }

// Step admits n units at now if the estimate leaves room for them. See the
// type's doc for the bound and core.Algorithm for the contract. A clock that
// moves backwards reads as standing still at the newest admission time. A
// cost n outside 1..Limit is denied without a RetryAfter (the Limiter never
// sends one).
//
// Overflow: now is clamped below 2^52 and Window is at most 2^42 µs, so an
// instant plus two windows stays far inside int64; counts are at most
// MaxLimit < 2^30. The products count × µs (up to 2^72) are computed in 128
// bits by scMulDiv, so no Limit × Window constraint is needed.
func (SlidingCounter) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	w, limit := p.WindowMicros(), p.Limit
	now = winClamp(now)
	last, prev, cur, ok := scDecode(state)
	eff := now
	if ok && last > eff {
		eff = last
	}
	start := eff - eff%w
	if !ok {
		prev, cur = 0, 0
	} else {
		switch last - last%w {
		case start:
		case start - w: // the state's window is now the previous one
			prev, cur = cur, 0
		default: // both windows have ended
			prev, cur = 0, 0
		}
	}
	elapsed := eff - start
	// ⌈prev·(W−elapsed)/W⌉ = prev − ⌊prev·elapsed/W⌋.
	est := cur + prev - scMulDiv(prev, elapsed, w)

	d := core.Decision{Limit: limit}
	valid := n >= 1 && n <= limit
	if valid && est+n <= limit {
		cur += n
		d.Allowed = true
		d.Remaining = limit - est - n
		// cur > 0 now weighs on the estimate until the end of the next
		// window.
		d.ResetAfter = core.Micros(start + 2*w - now)
		return scEncode(state, eff, prev, cur), d.ResetAfter, d
	}
	d.Remaining = max(0, limit-est)
	switch {
	case cur > 0:
		d.ResetAfter = core.Micros(start + 2*w - now)
	case prev > 0:
		d.ResetAfter = core.Micros(start + w - now)
	}
	if valid {
		d.RetryAfter = core.Micros(scRetryAt(start, w, limit, prev, cur, n) - now)
	}
	return nil, d.ResetAfter, d
}

// scRetryAt is the first instant at which n units are admitted, given that
// they are not admitted now: within the current window once prev has
// decayed enough, else in the next window (where cur becomes prev), else at
// the start of the window after that, where the key is fresh and n <= limit
// fits.
func scRetryAt(start, w, limit, prev, cur, n int64) int64 {
	// In this window: the first elapsed e with ⌈prev·(W−e)/W⌉ <= r, that is
	// e >= W − r·W/prev, so e = W − ⌊r·W/prev⌋. A denial with r >= 0 means
	// prev > r, so the quotient is below W.
	if r := limit - cur - n; r >= 0 && prev > r {
		if e := w - scMulDiv(r, w, prev); e < w {
			return start + e
		}
	}
	// In the next window, prev is cur and cur is 0.
	r := limit - n
	if cur <= r {
		return start + w
	}
	return start + w + (w - scMulDiv(r, w, cur))
}

// scMulDiv is ⌊a·b/c⌋ for 0 <= a, b and 0 < c, in 128 bits. Callers keep the
// quotient below 2^63 (it is at most max(a, b) everywhere above), so
// bits.Div64 cannot panic.
func scMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// Sliding counter state, version 1: version byte, newest admission time
// (µs, int64 big-endian), prev and cur (uint32 each); cur counts the
// aligned window holding the newest admission, prev the window before it.
const (
	scVersion = 1
	scLen     = 1 + 8 + 4 + 4
)

func scDecode(b []byte) (last, prev, cur int64, ok bool) {
	if len(b) != scLen || b[0] != scVersion {
		return 0, 0, 0, false
	}
	last = int64(binary.BigEndian.Uint64(b[1:]))
	prev = int64(binary.BigEndian.Uint32(b[9:]))
	cur = int64(binary.BigEndian.Uint32(b[13:]))
	if last < 0 || last > winMaxNow || prev > core.MaxLimit || cur > core.MaxLimit {
		return 0, 0, 0, false
	}
	return last, prev, cur, true
}

func scEncode(buf []byte, last, prev, cur int64) []byte {
	b := append(stateBuf(buf, scLen), scVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(last))
	b = binary.BigEndian.AppendUint32(b, uint32(prev))
	return binary.BigEndian.AppendUint32(b, uint32(cur))
}
