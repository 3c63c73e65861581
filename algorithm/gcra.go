package algorithm

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// GCRA is the generic cell rate algorithm: the token bucket's admissions
// kept as one integer, the theoretical arrival time TAT, instead of tokens
// and a time. With T = Policy.IntervalMicros() and B = Policy.Capacity(), a
// request of n units at now is admitted iff
//
//	max(TAT, now) + n·T − B·T <= now
//
// and then TAT becomes max(TAT, now) + n·T. TAT − now is the time the
// admitted units still owe, so a partial refill is no separate fraction:
// it is just a TAT that is not a whole number of intervals away. TAT is
// the token bucket's full time: GCRA decides exactly what TokenBucket
// decides, on a state of its own version (one Step serves both, tatStep).
// On a clock that steps back it judges at the earlier now, against a TAT
// set at a later one, which is stricter than standing still.
//
// Bound: the units admitted by calls whose now lies in any interval
// [t1, t2] number at most B + ⌊(t2 − t1)/T⌋, whatever order the calls come
// in, a clock that steps back included. (The first admission in the
// interval leaves TAT >= t1 + n·T, each later one adds its n·T, and the
// last needs TAT − B·T <= t2.)
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, at most B + ⌊(d + X)/T⌋ units in any real
// interval of length d. With X > s the TAT a correct instance reads is at
// most its now + B·T + s, a bucket drained as by a clock s ahead (TAT
// alone cannot tell how much the far clock's admissions owe, so the clamp
// assumes all of it): it is refused for at most s + n·T and has its whole
// burst back within s + B·T, never an hour for a clock an hour fast. Each
// handoff between the two time lines (a decision of one just after a write
// of the other) credits a refill of up to X (reader ahead) or X − s
// (reader behind) not earned: in an interval that holds it, up to ⌈X/T⌉
// or ⌈(X − s)/T⌉ units more (one for any step back beyond s), at most B
// more per handoff in real time. Counted on the readings of one clock
// that steps back by X, which repeat, it is up to ⌈(X − s)/T⌉ units more,
// which may exceed B.
//
// Memory per key: the Go state is 9 bytes (a version byte, TAT in µs as an
// int64). The Lua twin keeps one Redis string, TAT in decimal, which Redis
// stores as an integer. MEMORY USAGE on Redis 7.0 is then 72 bytes for a
// key of up to 30 bytes (the default prefix and a policy name of up to 4
// characters), 88 for 31 to 44 (names of 5 to 18 characters) and 104 for
// 45 to 60 (names of 19 to 34): the value takes 16 bytes, the rest is the
// key's name.
// The Go and Lua forms of the state do not mix on one key.
//
// Decision: Remaining is ⌊(now + B·T − TAT)/T⌋ (B after a quiet period);
// RetryAfter, on a denial, is max(TAT, now) + n·T − B·T − now; ResetAfter
// is TAT − now, which is also the TTL of the key (a TAT in the past reads
// as fresh). A denial writes nothing. GCRA has no fields and is safe for
// concurrent use.
type GCRA struct{}

var (
	_ core.Algorithm = GCRA{}
	_ core.Scripted  = GCRA{}
)

var gcraScript = loadScript("gcra")

// Name returns "gcra".
func (GCRA) Name() string { return "gcra" }

// Quota returns p.Capacity(): after a quiet period, Burst units pass at
// once.
func (GCRA) Quota(p *core.Policy) int64 { return p.Capacity() }

// Script returns the Lua twin, lua/gcra.lua.
func (GCRA) Script() *store.Script { return gcraScript }

// Step admits n units at now if they conform. See the type's doc for the
// rule and the bound, and core.Algorithm for the contract. A cost n outside
// 1..Capacity is denied without a RetryAfter (the Limiter never sends one).
func (GCRA) Step(state []byte, now, n int64, p *core.Policy) (next []byte, ttl time.Duration, d core.Decision) {
	return tatStep(state, gcraVersion, now, n, p)
}

// tatStep is GCRA's rule on a state that is one time, in the format of
// version v: GCRA's TAT, or the token bucket's full time, which is the same
// number (see TokenBucket). State of another version reads as absent.
//
// Overflow: now is clamped to [0, 2^52) and a stored time is at most 2^52 +
// 2^46; n·T and B·T are at most 2^45 (core.MaxHorizon), so no sum leaves
// 2^53.
func tatStep(state []byte, v byte, now, n int64, p *core.Policy) (next []byte, ttl time.Duration, d core.Decision) {
	b, t := p.Capacity(), p.IntervalMicros()
	now = bkClamp(now)
	tat := now
	if s, ok := tatDecode(state, v); ok && s > now {
		tat = s
	}
	bt := b * t
	d.Limit = b
	if n < 1 || n > b || tat+n*t-bt > now {
		// Remaining and ResetAfter as the state stands; tat − now exceeds
		// B·T only after the clock stepped back or the policy shrank.
		d.Remaining = max(0, now+bt-tat) / t
		d.ResetAfter = core.Micros(tat - now)
		if n >= 1 && n <= b {
			// now + RetryAfter = tat − (B−n)·T <= tat, so tat still rules
			// then and the test passes with equality; one µs earlier it
			// fails.
			d.RetryAfter = core.Micros(tat + n*t - bt - now)
		}
		return nil, 0, d
	}
	tat += n * t
	d.Allowed = true
	d.Remaining = (now + bt - tat) / t // >= 0: that is the test just passed
	d.ResetAfter = core.Micros(tat - now)
	return tatEncode(state, v, tat), d.ResetAfter, d
}

// GCRA state, version 1: gcraVersion, TAT (µs, int64 big-endian). The high
// nibble of the version byte names the algorithm, so a key reused by
// another algorithm reads as absent.
const (
	gcraVersion = 0x31
	gcraLen     = 1 + 8
)

func gcraDecode(s []byte) (tat int64, ok bool) { return tatDecode(s, gcraVersion) }

func gcraEncode(buf []byte, tat int64) []byte { return tatEncode(buf, gcraVersion, tat) }

// tatDecode reads a state of one time in the format of version v (the
// version byte, the time in µs as an int64 big-endian): GCRA's and the
// token bucket's, each with its own version byte.
func tatDecode(s []byte, v byte) (t int64, ok bool) {
	if len(s) != gcraLen || s[0] != v {
		return 0, false
	}
	t = int64(binary.BigEndian.Uint64(s[1:]))
	return t, bkTimeOK(t)
}

func tatEncode(buf []byte, v byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(append(stateBuf(buf, gcraLen), v), uint64(t))
}

// Uncharged is ResetAfter before the n units of admission d were charged
// (core.Uncharger): its TAT, n·T earlier.
func (GCRA) Uncharged(d core.Decision, n int64, p *core.Policy) time.Duration {
	return unchargedTAT(d, n, p)
}

// unchargedTAT is ResetAfter of an admission whose one time moved n·T
// later, without the move.
func unchargedTAT(d core.Decision, n int64, p *core.Policy) time.Duration {
	return max(0, d.ResetAfter-core.Micros(n*p.IntervalMicros()))
}
