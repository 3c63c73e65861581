package algorithm

import (
	"encoding/binary"
	"sort"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// SlidingLogMaxLimit is the largest Policy.Limit the sliding log accepts: it
// keeps one entry per admitted unit, so Limit bounds the size of a key.
const SlidingLogMaxLimit = 10_000

// SlidingLog keeps the time of every admitted unit and admits n units at t
// when fewer than Limit − n + 1 of them fall in the trailing window
// (t−W, t].
//
// Bound: exact. At most Limit units in every trailing window (t−W, t], for
// every t; and a request is denied only when admitting it would break that.
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, at most Limit in every real interval of
// length W − X. With X > s every unit the off instance admitted is counted
// by the correct instances until at most their now + s + W, so they meet
// their whole Limit again within s + W of their first decision after its
// write; each handoff between the two time lines (a decision of one just
// after a write of the other) may let the reader's window drop units the
// other admitted up to X (reader ahead) or X − s (reader behind) ago: at
// most Limit more per handoff.
//
// Memory per key: the Go state keeps one entry per unit admitted in the
// trailing window, so at most Limit entries: 1 + 8·k bytes for k entries
// (at most 80,001 bytes, since CheckPolicy caps Limit at
// SlidingLogMaxLimit). The Lua twin keeps a Redis sorted set with one member
// per admitting instant, not per unit (score: the time in µs; member:
// "<cum>/<count>", the units admitted at that instant and by the key up to
// it), so at most Limit members, fewer when decisions cost more than one
// unit: by MEMORY USAGE on Redis 7.0, about 17 bytes a member while the set
// fits Redis's compact listpack encoding (128 members by default), about
// 100 bytes a member beyond (1 MB at 10,000 single-unit instants).
//
// Work per decision, whatever its cost n (a client may choose n, up to
// Limit): the Lua twin adds or grows one member, counts the window with two
// O(log k) lookups, and drops at most 16 members that have left it (never
// the whole log at once), so a script holds Redis for O(log k) commands; a
// denial's RetryAfter bisects the members, O(log² k). Measured on Redis 7.0
// with Limit 10,000: 62–66 µs of server time for a cost of 10,000 (it was
// 7.4–8.0 ms with a member per unit), 60–100 µs to deny on a full log of
// 10,000 instants. The Go step costs O(log k) to deny, plus O(k + n) to
// admit (it drops the entries that left the window by moving the rest to
// the front, and appends n), in process memory: a few µs at 10,000.
//
// A sorted set of the twin's earlier form (one member per unit,
// "<µs>:<i>") reads as absent, so on upgrading each live key starts fresh
// once, which can admit up to one more quota per key.
//
// A denial writes nothing. SlidingLog has no fields and is safe for
// concurrent use.
type SlidingLog struct{}

var (
	_ core.Algorithm     = SlidingLog{}
	_ core.Scripted      = SlidingLog{}
	_ core.PolicyChecker = SlidingLog{}
)

var slidingLogScript = loadScript("sliding-log")

// Name returns "sliding-log".
func (SlidingLog) Name() string { return "sliding-log" }

// Quota returns p.Limit: an empty log admits Limit units at once.
func (SlidingLog) Quota(p *core.Policy) int64 { return p.Limit }

// Script returns the Lua twin, lua/sliding-log.lua.
func (SlidingLog) Script() *store.Script { return slidingLogScript }

// CheckPolicy rejects, with a *core.PolicyError naming Limit, a Limit above
// SlidingLogMaxLimit, on top of what p.Validate checks.
func (SlidingLog) CheckPolicy(p *core.Policy) error {
	return capLimit(p, SlidingLogMaxLimit, "the sliding log, which keeps one entry per admitted unit")
}

// Step admits n units at now if the trailing window has room for them,
// dropping the entries that have left it. See the type's doc for the bound
// and core.Algorithm for the contract. A clock that moves backwards reads as
// standing still at the newest entry. A cost n outside 1..Limit is denied
// without a RetryAfter (the Limiter never sends one).
//
// Overflow: now and the entries read are from 0 to 2^52 µs (slEntries
// checks the two ends; RetryAfter's entry is clamped between them) and
// Window is at most 2^42 µs, so an entry plus a window stays far inside
// int64.
func (SlidingLog) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	w, limit := p.WindowMicros(), p.Limit
	now = winClamp(now)
	entries, ok := slEntries(state)
	k := len(entries) / 8
	eff := now
	var oldest, last int64 = 0, -1
	if k > 0 {
		oldest, last = slAt(entries, 0), slAt(entries, k-1)
		eff = max(eff, last)
	}
	// Entries are sorted, so the ones at or before eff−W, which have left
	// the window, are a prefix: first is the oldest live one.
	cutoff := eff - w
	first := sort.Search(k, func(i int) bool { return slAt(entries, i) > cutoff })
	live := int64(k - first)

	d := core.Decision{Limit: limit}
	valid := n >= 1 && n <= limit
	if valid && live+n <= limit {
		d.Allowed = true
		d.Remaining = limit - live - n
		d.ResetAfter = core.Micros(eff + w - now)
		// The live entries move to the front of the same array (append
		// copies with memmove semantics; nothing moves when none left the
		// window), then n entries at eff follow.
		var b []byte
		if ok && first == 0 {
			b = state[:1+8*k]
		} else {
			b = append(state[:0], slVersion)
			b = append(b, entries[8*first:]...)
		}
		for range n {
			b = binary.BigEndian.AppendUint64(b, uint64(eff))
		}
		return b, d.ResetAfter, d
	}
	d.Remaining = max(0, limit-live)
	if live > 0 {
		d.ResetAfter = core.Micros(last + w - now)
	}
	if valid {
		// Admitting n needs m = live+n−Limit entries to leave; the m-th
		// oldest live one leaves at its time + W, taking any entries of the
		// same instant with it. 1 <= m <= live because n <= Limit. (The
		// clamp only matters for a log that is not sorted, which Step never
		// writes: it keeps the sum in range.)
		m := live + n - limit
		at := min(max(slAt(entries, first+int(m)-1), oldest), last)
		d.RetryAfter = core.Micros(at + w - now)
	}
	return nil, d.ResetAfter, d
}

// Sliding log state, version 1: version byte, then one int64 big-endian
// time (µs) per admitted unit, oldest first.
const slVersion = 1

// slEntries returns the entries of a valid state: a whole number of times,
// the first from 0 and the last up to winMaxNow, the first no later than
// the last. Anything else reads as absent (nil, false). Step writes the
// entries sorted; checking every pair would cost O(k) on each call, so only
// the two ends are checked, which keeps every sum in range.
func slEntries(b []byte) ([]byte, bool) {
	if len(b) < 1 || b[0] != slVersion || (len(b)-1)%8 != 0 {
		return nil, false
	}
	e := b[1:]
	if k := len(e) / 8; k > 0 {
		oldest, last := slAt(e, 0), slAt(e, k-1)
		if oldest < 0 || last > winMaxNow || oldest > last {
			return nil, false
		}
	}
	return e, true
}

func slAt(e []byte, i int) int64 { return int64(binary.BigEndian.Uint64(e[8*i:])) }
