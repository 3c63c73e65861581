package algorithm

import (
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// TokenBucket is a bucket of B = Policy.Capacity() tokens, refilled with one
// whole token every T = Policy.IntervalMicros() µs (Window/Limit, rounded
// up). A request of n units takes n tokens, or is denied when fewer are
// left. A fresh key starts full, so B units pass at once after a quiet
// period and then one unit per T.
//
// The state is one integer, the bucket's full time F: the instant the
// bucket is full again, F = last + (B − tokens)·T for the tokens left and
// the time last up to which they are counted. A refill does not move F
// (each token earned is an interval of F − now gone by), so at now (>= last)
// the bucket holds B − ⌈(F − now)/T⌉ tokens, B once F <= now; n of them are
// there iff F + n·T − B·T <= now; and taking them sets F to max(F, now) +
// n·T. That is GCRA's rule with F for TAT: the token bucket decides exactly
// what GCRA decides, on a state of its own version, and one Step serves
// both (tatStep). The fraction of an interval already earned is kept in F,
// exactly.
//
// A clock that steps back is judged at the earlier now, against an F set
// at a later one: stricter than standing still. A change of policy keeps
// F, the time the admitted units still owe, and reads it under the new
// Burst B' and interval T': the bucket holds B' − ⌈(F − now)/T'⌉ tokens,
// none while the debt exceeds B'·T' (a cut from a deeper bucket refuses
// until the debt is down to the new depth), so a change admits no more, in
// any interval, than the larger policy allows when the larger is also at
// least as deep in time (Burst/Limit), as for GCRA
// (TestLimitChangeNeverExceedsTheLarger); where the Limiter clamps for a
// ClockSkew s, a change to a shallower bucket forgives the debt beyond its
// B'·T' + s, as it would a fast clock's (see core.Tiers). The two-integer
// state of earlier releases kept the tokens instead, capped at the new
// Burst.
//
// Bound: the units admitted by calls whose now lies in any interval
// [t1, t2] number at most B + ⌊(t2 − t1)/T⌋, whatever order the calls come
// in, a clock that steps back included (GCRA's proof, with F for TAT).
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, at most B + ⌊(d + X)/T⌋ units in any real
// interval of length d. With X > s the F a correct instance reads is at
// most its now + B·T + s, a bucket drained as by a clock s ahead (F alone
// cannot tell how many of the far clock's tokens were taken, so the clamp
// assumes all of them): it is refused for at most s + n·T and has its whole
// bucket back within s + B·T. Each handoff between the two time lines (a
// decision of one just after a write of the other) refills for up to X
// (reader ahead) or X − s (reader behind) not earned: in an interval that
// holds it, up to ⌈X/T⌉ or ⌈(X − s)/T⌉ tokens more (one for any step back
// beyond s), at most B more per handoff in real time. Counted on the
// readings of one clock that steps back by X, which repeat, it is up to
// ⌈(X − s)/T⌉ tokens more, which may exceed B.
//
// Memory per key: the Go state is 9 bytes (a version byte, F in µs as an
// int64). The Lua twin is GCRA's (lua/gcra.lua): one Redis string, F in
// decimal, which Redis stores as an integer, 72 bytes of MEMORY USAGE for
// a key of up to 30 bytes, 88 for 31 to 44, 104 for 45 to 60. The Go and Lua forms of the
// state do not mix on one key. In Go a GCRA state and a token bucket state
// read as absent to each other (the version byte); in Redis they are one
// number, which either twin reads as its own (a key names its policy, and
// a policy has one algorithm). A key written in the two-integer form of
// earlier releases (tokens and last) reads as absent, a full bucket, once;
// this release's key hash (see store/key.go) leaves such keys unread
// anyway.
//
// Decision: Remaining is the tokens left, ⌊(now + B·T − F)/T⌋ (at least 0);
// RetryAfter the time until n tokens are there, max(F, now) + n·T − B·T −
// now; ResetAfter the time until the bucket is full, F − now, which is also
// the TTL of the key (a full bucket reads as fresh). A denial writes
// nothing. TokenBucket has no fields and is safe for concurrent use.
type TokenBucket struct{}

var (
	_ core.Algorithm = TokenBucket{}
	_ core.Scripted  = TokenBucket{}
)

var tokenBucketScript = loadTwin("token-bucket", "gcra")

// Name returns "token-bucket".
func (TokenBucket) Name() string { return "token-bucket" }

// Quota returns p.Capacity(): a full bucket admits Burst units at once.
func (TokenBucket) Quota(p *core.Policy) int64 { return p.Capacity() }

// Script returns the Lua twin, lua/gcra.lua: the token bucket's full time is
// GCRA's TAT.
func (TokenBucket) Script() *store.Script { return tokenBucketScript }

// Step takes n tokens if there are that many at now. See the type's doc for
// the rule and the bound, and core.Algorithm for the contract. A cost n
// outside 1..Capacity is denied without a RetryAfter (the Limiter never
// sends one).
func (TokenBucket) Step(state []byte, now, n int64, p *core.Policy) (next []byte, ttl time.Duration, d core.Decision) {
	return tatStep(state, tbVersion, now, n, p)
}

// Token bucket state, version 2: tbVersion, the full time F (µs, int64
// big-endian). The high nibble of the version byte names the algorithm, so
// a key reused by another algorithm reads as absent; version 1 (0x21) was
// the tokens left and last, 13 bytes, and reads as absent too.
const tbVersion = 0x22

func tbDecode(s []byte) (full int64, ok bool) { return tatDecode(s, tbVersion) }

func tbEncode(buf []byte, full int64) []byte { return tatEncode(buf, tbVersion, full) }

// Uncharged is ResetAfter before the n units of admission d were charged
// (core.Uncharger): its full time, n·T earlier.
func (TokenBucket) Uncharged(d core.Decision, n int64, p *core.Policy) time.Duration {
	return unchargedTAT(d, n, p)
}
