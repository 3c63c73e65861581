package algorithm

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// FixedWindow admits at most Policy.Limit units in each window of
// Policy.Window. Windows are aligned to multiples of Window since the Unix
// epoch, so every instance agrees on where a window starts without talking
// to the others.
//
// Bound: at most Limit units in every aligned window [kW, (k+1)W). A
// trailing window that straddles a boundary can hold up to 2·Limit units
// (Limit at the end of one window, Limit at the start of the next); use
// SlidingLog where that burst matters.
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, at most Limit in every aligned window of
// the keys' time line, whose edges real time sees up to X early or late.
// With X > s the correct instances are never held past the end of the
// window that holds their now + s, whose count keeps what the off instance
// admitted; each handoff between the two time lines (a decision of one just
// after a write of the other) may open a fresh window, always so when X >=
// W: at most one Limit more per handoff.
//
// Memory per key: the Go state is 13 bytes (a version byte, the newest
// admission time, the count of its window). The Lua twin keeps all that the
// step's decisions read of it, the start of that window and the count, as
// one Redis integer, start + count − 1 (see lua/fixed-window.lua): MEMORY
// USAGE on Redis 7.0 is 72 bytes for a key of up to 30 bytes (the default
// prefix and a policy name of up to 4 characters), 88 for 31 to 44 (names
// of 5 to 18 characters) and 104 for 45 to 60 (names of 19 to 34).
//
// The twin decides exactly as Step for every sequence of calls under one
// Window, whatever the Limit of each. A key written under another Window (a
// policy reconfigured under the same name) is read otherwise than by Step,
// since the twin keeps a window and not an instant: as counts in a window
// near the time it was written, never as a wait longer than the old window
// and twice the new one.
//
// Decision.Remaining is Limit minus the window's count; RetryAfter and
// ResetAfter are the time to the window's end. A denial writes nothing.
// FixedWindow has no fields and is safe for concurrent use.
type FixedWindow struct{}

var (
	_ core.Algorithm = FixedWindow{}
	_ core.Scripted  = FixedWindow{}
)

var fixedWindowScript = loadScript("fixed-window")

// Name returns "fixed-window".
func (FixedWindow) Name() string { return "fixed-window" }

// Quota returns p.Limit: a fresh window admits Limit units at once.
func (FixedWindow) Quota(p *core.Policy) int64 { return p.Limit }

// Script returns the Lua twin, lua/fixed-window.lua.
func (FixedWindow) Script() *store.Script { return fixedWindowScript }

// Step admits n units at now if the aligned window that holds now has room
// for them. See the type's doc for the bound; see core.Algorithm for the
// contract. A clock that moves backwards reads as standing still at the
// newest admission time, so it can neither reopen a past window nor refund
// units. A cost n outside 1..Limit is denied without a RetryAfter (the
// Limiter never sends one).
//
// Overflow: now is clamped below 2^52 and Window is at most 2^42 µs, so an
// instant plus a window never leaves int64 (nor 2^53, for the Lua twin);
// counts are at most 2·MaxLimit.
func (FixedWindow) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	w, limit := p.WindowMicros(), p.Limit
	now = winClamp(now)
	last, used, ok := fwDecode(state)
	eff := now
	if ok && last > eff {
		eff = last
	}
	start := eff - eff%w
	if !ok || last-last%w != start {
		// The state's window has ended: the key reads as fresh. (last is
		// never in a later window than eff, because eff >= last.)
		used = 0
	}
	end := start + w
	d := core.Decision{Limit: limit}
	valid := n >= 1 && n <= limit
	if valid && used+n <= limit {
		used += n
		d.Allowed = true
		d.Remaining = limit - used
		d.ResetAfter = core.Micros(end - now)
		return fwEncode(state, eff, used), d.ResetAfter, d
	}
	d.Remaining = max(0, limit-used)
	if used > 0 {
		d.ResetAfter = core.Micros(end - now)
	}
	if valid {
		// n <= Limit always fits in the next window, which starts at end.
		d.RetryAfter = core.Micros(end - now)
	}
	return nil, d.ResetAfter, d
}

// Fixed window state, version 1: version byte, newest admission time (µs,
// int64 big-endian), units admitted in that time's window (uint32).
const (
	fwVersion = 1
	fwLen     = 1 + 8 + 4
)

func fwDecode(b []byte) (last, count int64, ok bool) {
	if len(b) != fwLen || b[0] != fwVersion {
		return 0, 0, false
	}
	last = int64(binary.BigEndian.Uint64(b[1:]))
	count = int64(binary.BigEndian.Uint32(b[9:]))
	if last < 0 || last > winMaxNow || count > core.MaxLimit {
		return 0, 0, false
	}
	return last, count, true
}

func fwEncode(buf []byte, last, count int64) []byte {
	b := append(stateBuf(buf, fwLen), fwVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(last))
	return binary.BigEndian.AppendUint32(b, uint32(count))
}

// winMaxNow is the latest instant the window algorithms read: 2^52−1 µs
// since the epoch, in the year 2112. A later now reads as winMaxNow and an
// earlier one than the epoch as 0, so that an instant plus two windows (at
// most 2^43 µs) stays below 2^53: exact in the Lua twins' float64 numbers,
// and far from int64 overflow in Go. The Lua twins clamp the same way.
const winMaxNow = 1<<52 - 1

func winClamp(now int64) int64 {
	return min(max(now, 0), winMaxNow)
}
