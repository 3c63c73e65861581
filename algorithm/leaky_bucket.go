package algorithm

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// LeakyBucket is the leaky bucket as a queue: it shapes traffic instead of
// dropping it. Requests join a queue that drains one unit every T =
// Policy.IntervalMicros() µs; the first B = Policy.Capacity() units after a
// quiet period start at once, later ones are admitted with a Decision.Delay
// (their place in the queue), and a request that would wait longer than M =
// Policy.MaxDelayMicros() is denied.
//
// The state is one time, drain: when the queue is empty again. A request of
// n units at now, with base = max(drain, now), is given
//
//	delay = max(0, base + n·T − B·T − now)
//
// and is admitted iff delay <= M, moving drain to base + n·T. It is GCRA
// with a tolerance of B·T + M in which the last M is paid for by waiting.
//
// Quota (Decision.Limit) is B + ⌊M/T⌋: the most units one instant can
// admit from an empty queue, the last of them with a delay of at most M.
//
// Bound: the units admitted by calls whose now lies in any interval
// [t1, t2] number at most B + ⌊(t2 − t1 + M)/T⌋, whatever order the calls
// come in (the first leaves drain >= t1 + n·T, each later one adds n·T,
// the last needs drain − B·T − now <= M). Shaped, the work starts later:
// if every admitted request starts at now + Delay, then for any two of them
// i before j, the units of i through j number at most max(B, n_i) +
// ⌊(start_j − start_i)/T⌋. With a clock that never steps back the starts
// come in order, so costs of at most B start at no more than B + ⌊d/T⌋
// units in any interval of length d: the policy's rate.
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, at most B + ⌊(d + X + M)/T⌋ units in any
// real interval of length d. With X > s the drain a correct instance reads
// is at most its now + B·T + M + s, a queue filled as by a clock s ahead
// (the clamp assumes the far clock's admissions owe all of it): it is
// refused for at most s + n·T and has its whole Quota back within s + B·T
// + M. Each handoff between the two time lines (a decision of one just
// after a write of the other) drains a queue of up to X (reader ahead) or
// X − s (reader behind) not served: in an interval that holds it, up to
// ⌈X/T⌉ or ⌈(X − s)/T⌉ units more, at most Quota more per handoff.
//
// Memory per key: the Go state is 9 bytes (a version byte, drain in µs as
// an int64). The Lua twin keeps one Redis string, drain in decimal, which
// Redis stores as an integer: MEMORY USAGE as for GCRA (72 bytes for a key
// of up to 30 bytes, 88 for 31 to 44, 104 for 45 to 60). The Go and Lua forms of the state
// do not mix on one key.
//
// Decision: Remaining is how many units one more request could take now
// within M, ⌊(now + M + B·T − max(drain, now))/T⌋; RetryAfter, on a denial,
// is delay − M; ResetAfter is the time until Remaining is back to Quota,
// max(0, drain − now − M mod T); Delay is delay. The key's TTL is drain −
// now (an empty queue reads as fresh). A denial writes nothing. LeakyBucket
// has no fields and is safe for concurrent use.
type LeakyBucket struct{}

var (
	_ core.Algorithm = LeakyBucket{}
	_ core.Scripted  = LeakyBucket{}
)

var leakyBucketScript = loadScript("leaky-bucket")

// Name returns "leaky-bucket".
func (LeakyBucket) Name() string { return "leaky-bucket" }

// Quota returns p.Capacity() + ⌊p.MaxDelayMicros()/p.IntervalMicros()⌋
// (p.Capacity() for a Policy with no interval, which Validate refuses).
func (LeakyBucket) Quota(p *core.Policy) int64 {
	t := p.IntervalMicros()
	if t < 1 {
		return p.Capacity()
	}
	return p.Capacity() + p.MaxDelayMicros()/t
}

// Script returns the Lua twin, lua/leaky-bucket.lua.
func (LeakyBucket) Script() *store.Script { return leakyBucketScript }

// Step queues n units at now if they would start within MaxDelay. See the
// type's doc for the rule and the bound, and core.Algorithm for the
// contract. A clock that steps back finds drain where it was: nothing
// drains, and the delay is measured from the earlier now, so it is longer.
// A cost n outside 1..Quota is denied without a RetryAfter (the Limiter
// never sends one).
//
// Overflow: now is clamped to [0, 2^52) and a stored drain is at most 2^52
// + 2^46; n·T <= B·T + M, with B·T <= 2^45 (core.MaxHorizon) and M <
// 2^42 (core.MaxWindow), so no sum leaves 2^53.
func (LeakyBucket) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	b, t, m := p.Capacity(), p.IntervalMicros(), p.MaxDelayMicros()
	now = bkClamp(now)
	base := now
	if s, ok := lbDecode(state); ok && s > now {
		base = s
	}
	bt := b * t
	quota := b + m/t
	d := core.Decision{Limit: quota}
	if n < 1 || n > quota {
		lbReport(&d, base, now, bt, t, m)
		return nil, 0, d
	}
	drain := base + n*t
	delay := max(0, drain-bt-now)
	if delay > m {
		lbReport(&d, base, now, bt, t, m)
		// A denial means base > now (from an empty queue every n <= Quota
		// fits), so base still rules at now + RetryAfter, where the delay
		// is exactly M; one µs earlier it is M + 1.
		d.RetryAfter = core.Micros(delay - m)
		return nil, 0, d
	}
	d.Allowed = true
	d.Delay = core.Micros(delay)
	lbReport(&d, drain, now, bt, t, m)
	return lbEncode(state, drain), core.Micros(drain - now), d
}

// lbReport fills Remaining and ResetAfter for a queue that drains at drain
// (drain >= now). Remaining is the largest r with drain + r·T − B·T − now
// <= M. It is Quota exactly when drain − now <= M mod T, hence ResetAfter.
func lbReport(d *core.Decision, drain, now, bt, t, m int64) {
	d.Remaining = max(0, now+m+bt-drain) / t
	d.ResetAfter = core.Micros(max(0, drain-now-m%t))
}

// Leaky bucket state, version 1: lbVersion, drain (µs, int64 big-endian).
// The high nibble of the version byte names the algorithm, so a key reused
// by another algorithm reads as absent.
const (
	lbVersion = 0x41
	lbLen     = 1 + 8
)

func lbDecode(s []byte) (drain int64, ok bool) {
	if len(s) != lbLen || s[0] != lbVersion {
		return 0, false
	}
	drain = int64(binary.BigEndian.Uint64(s[1:]))
	return drain, bkTimeOK(drain)
}

func lbEncode(buf []byte, drain int64) []byte {
	return binary.BigEndian.AppendUint64(append(stateBuf(buf, lbLen), lbVersion), uint64(drain))
}

// Uncharged is ResetAfter before the n units of admission d were charged
// (core.Uncharger): its drain time, n·T earlier.
func (LeakyBucket) Uncharged(d core.Decision, n int64, p *core.Policy) time.Duration {
	return unchargedTAT(d, n, p)
}
