package algorithm

import (
	"encoding/binary"
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
// The state is two integers, the tokens left and the time last up to which
// they are counted. Only whole tokens are added, and last advances by whole
// intervals, so the fraction of an interval already earned is kept exactly
// in now − last (once the bucket is full, last moves to now: a full bucket
// earns nothing). GCRA decides the same admissions from one integer; the two
// differ only on a clock that steps back, where the token bucket stands
// still at last and GCRA judges at the earlier now, which is stricter.
//
// Bound: when the clock never steps back, the units admitted by calls whose
// now lies in any interval [t1, t2] number at most B + ⌊(t2 − t1)/T⌋. A call
// whose now is earlier than the latest now H of the admissions before it is
// admitted or denied exactly as it would be at H, so with a clock that steps
// back the bound holds with each call counted at max(now, H).
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, at most B + ⌊(d + X)/T⌋ units in any real
// interval of length d. With X > s a correct instance's first decision
// after the off instance wrote keeps the tokens and stands still only
// until its now + s, then refills as usual: refused for at most s longer
// than the tokens alone would make it wait. Each handoff between the two
// time lines (a decision of one just after a write of the other) refills
// ⌊X/T⌋ (reader ahead) or ⌊(X − s)/T⌋ (reader behind) tokens it did not
// earn: at most B more per handoff.
//
// Memory per key: the Go state is 13 bytes (a version byte, tokens as a
// uint32, last in µs as an int64). The Lua twin keeps one Redis string,
// the digits of tokens + 1 followed by last in 16 digits. While tokens <=
// 920 that is a 64-bit integer, which Redis stores as one: MEMORY USAGE as
// for GCRA (88 bytes for a key of up to 44 bytes, 104 for 45 to 60). With
// more tokens it is a string of up to 26 bytes, 16 to 32 bytes more. The Go
// and Lua forms of the state do not mix on one key.
//
// Decision: Remaining is the tokens left; RetryAfter the time until n tokens
// are there; ResetAfter the time until the bucket is full, which is also the
// TTL of the key (a full bucket reads as fresh). A denial writes nothing.
// TokenBucket has no fields and is safe for concurrent use.
type TokenBucket struct{}

var (
	_ core.Algorithm = TokenBucket{}
	_ core.Scripted  = TokenBucket{}
)

var tokenBucketScript = loadScript("token-bucket")

// Name returns "token-bucket".
func (TokenBucket) Name() string { return "token-bucket" }

// Quota returns p.Capacity(): a full bucket admits Burst units at once.
func (TokenBucket) Quota(p *core.Policy) int64 { return p.Capacity() }

// Script returns the Lua twin, lua/token-bucket.lua.
func (TokenBucket) Script() *store.Script { return tokenBucketScript }

// Step refills the bucket up to now and takes n tokens if there are that
// many. See the type's doc for the bound and core.Algorithm for the
// contract. A now earlier than last adds nothing and moves nothing, so a
// clock that steps back stands still. A cost n outside 1..Capacity is
// denied without a RetryAfter (the Limiter never sends one). A state with
// more tokens than the policy's capacity (the policy shrank) holds a full
// bucket.
//
// Overflow: now is clamped to [0, 2^52) and last is at most now, so now −
// last fits; a refill of k < B − tokens whole intervals moves last by k·T <
// B·T <= 2^45 µs (core.MaxHorizon), and every other product is at most B·T.
func (TokenBucket) Step(state []byte, now, n int64, p *core.Policy) (next []byte, ttl time.Duration, d core.Decision) {
	b, t := p.Capacity(), p.IntervalMicros()
	now = bkClamp(now)
	tokens, last, ok := tbDecode(state)
	if !ok {
		tokens, last = b, now
	} else if tokens > b {
		tokens = b
	}
	if now > last {
		// Compare before adding, so that a long idle time cannot overflow
		// tokens + k.
		if k := (now - last) / t; k >= b-tokens {
			tokens, last = b, now
		} else {
			tokens += k
			last += k * t
		}
	}
	d.Limit, d.Remaining = b, tokens
	if n < 1 || n > b || tokens < n {
		if tokens < b {
			d.ResetAfter = core.Micros(last + (b-tokens)*t - now)
		}
		if n >= 1 && n <= b {
			// The (n − tokens)-th token from now arrives then; one µs earlier
			// it has not.
			d.RetryAfter = core.Micros(last + (n-tokens)*t - now)
		}
		// The refill above is a pure function of the old state and now,
		// so there is nothing to write.
		return nil, 0, d
	}
	tokens -= n
	d.Allowed = true
	d.Remaining = tokens
	// tokens < b now, and last > now − T (or last == now), so this is > 0.
	d.ResetAfter = core.Micros(last + (b-tokens)*t - now)
	return tbEncode(state, tokens, last), d.ResetAfter, d
}

// Token bucket state, version 1: tbVersion, tokens (uint32 big-endian),
// last (µs, int64 big-endian). The high nibble of the version byte names
// the algorithm, so a key reused by another algorithm reads as absent.
const (
	tbVersion = 0x21
	tbLen     = 1 + 4 + 8
)

func tbDecode(s []byte) (tokens, last int64, ok bool) {
	if len(s) != tbLen || s[0] != tbVersion {
		return 0, 0, false
	}
	tokens = int64(binary.BigEndian.Uint32(s[1:]))
	last = int64(binary.BigEndian.Uint64(s[5:]))
	return tokens, last, bkTimeOK(last)
}

func tbEncode(buf []byte, tokens, last int64) []byte {
	s := append(stateBuf(buf, tbLen), tbVersion)
	s = binary.BigEndian.AppendUint32(s, uint32(tokens))
	return binary.BigEndian.AppendUint64(s, uint64(last))
}
