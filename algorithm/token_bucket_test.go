package algorithm

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// 10 per second with a burst of 5: T = 100ms, B = 5.
var tbPolicy = core.Policy{Name: "tb", Limit: 10, Window: time.Second, Burst: 5}

func TestTokenBucketSteps(t *testing.T) {
	const T = 100_000
	ms := time.Millisecond
	state := runCalls(t, TokenBucket{}, tbPolicy, nil, []bkCall{
		// A fresh key is a full bucket.
		{bkT0, 1, admit(5, 4, T, 0), 100 * ms},
		{bkT0, 4, admit(5, 0, 5*T, 0), 500 * ms},
		{bkT0, 1, deny(5, 0, T, 5*T), 0},
		// 1.5 intervals later: one whole token; the half is kept.
		{bkT0 + 150_000, 2, deny(5, 1, 50_000, 350_000), 0},
		{bkT0 + 200_000, 2, admit(5, 0, 5*T, 0), 500 * ms},
		// The clock steps back: judged at the earlier now against the
		// same full time, so the bucket is further from full.
		{bkT0 + 100_000, 1, deny(5, 0, 200_000, 600_000), 0},
		// 1µs short of a token, then exactly on it.
		{bkT0 + 299_999, 1, deny(5, 0, 1, 400_001), 0},
		{bkT0 + 300_000, 1, admit(5, 0, 5*T, 0), 500 * ms},
		// Long idle: full again; n = B takes it all at once.
		{bkT0 + 10_000_000, 5, admit(5, 0, 5*T, 0), 500 * ms},
		{bkT0 + 10_000_000, 1, deny(5, 0, T, 5*T), 0},
		// 2.5 intervals: two tokens, half an interval kept in the full
		// time.
		{bkT0 + 10_250_000, 1, admit(5, 1, 350_000, 0), 350 * ms},
		{bkT0 + 10_299_999, 1, admit(5, 0, 400_001, 0), 400_001 * time.Microsecond},
		{bkT0 + 10_299_999, 5, deny(5, 0, 400_001, 400_001), 0},
		// Refilled past full: the bucket holds B, and the fraction is
		// dropped (the full time is in the past: now counts).
		{bkT0 + 10_200_000 + 7*T + 50, 3, admit(5, 2, 3*T, 0), 300 * ms},
		{bkT0 + 10_200_000 + 8*T + 49, 3, deny(5, 2, 1, 3*T-T+1), 0},
	})
	checkFreshAfterTTL(t, TokenBucket{}, &tbPolicy, state, bkT0+10_200_000+7*T+50, 300*ms)
}

func TestTokenBucketFreshAtOneInstant(t *testing.T) {
	for _, p := range bkRatePolicies {
		for seed := range uint64(5) {
			checkAtOneInstant(t, TokenBucket{}, p, p.Capacity(), seed)
		}
	}
}

// A change of policy keeps the full time, a debt in time, and measures it
// against the new Burst and rate: drained under a burst of 9, the bucket
// holds nothing under a burst of 5 until its debt is below 5 intervals;
// drained by 2 under a burst of 5, it is 2 short of full under a burst of 9.
func TestTokenBucketPolicyChangeKeepsTheDebt(t *testing.T) {
	const T = 100_000
	large := core.Policy{Name: "tb", Limit: 10, Window: time.Second, Burst: 9}
	state := runCalls(t, TokenBucket{}, large, nil, []bkCall{
		{bkT0, 9, admit(9, 0, 9*T, 0), 900 * time.Millisecond},
	})
	runCalls(t, TokenBucket{}, tbPolicy, state, []bkCall{
		{bkT0, 1, deny(5, 0, 5*T, 9*T), 0},
		{bkT0 + 5*T - 1, 1, deny(5, 0, 1, 4*T+1), 0},
		{bkT0 + 5*T, 1, admit(5, 0, 5*T, 0), 500 * time.Millisecond},
	})
	state = runCalls(t, TokenBucket{}, tbPolicy, nil, []bkCall{
		{bkT0, 2, admit(5, 3, 2*T, 0), 200 * time.Millisecond},
	})
	runCalls(t, TokenBucket{}, large, state, []bkCall{
		{bkT0, 8, deny(9, 7, T, 2*T), 0},
		{bkT0, 7, admit(9, 0, 9*T, 0), 900 * time.Millisecond},
	})
}

func TestTokenBucketInvalidCost(t *testing.T) {
	for _, n := range []int64{0, -1, 6, math.MaxInt64} {
		runCalls(t, TokenBucket{}, tbPolicy, nil, []bkCall{{bkT0, n, deny(5, 5, 0, 0), 0}})
	}
}

func TestTokenBucketUndecodable(t *testing.T) {
	good := tbEncode(nil, bkT0+50)
	// The two-integer state of earlier releases (version 0x21: tokens as a
	// uint32, last as an int64) reads as absent: a full bucket, once.
	old := append([]byte{0x21, 0, 0, 0, 2}, good[1:]...)
	checkUndecodable(t, TokenBucket{}, tbPolicy, [][]byte{
		{},
		{tbVersion},
		good[:len(good)-1],
		append(clone(good), 0),
		old,
		append([]byte{0x21}, good[1:]...),
		append([]byte{gcraVersion}, good[1:]...),
		tbEncode(nil, -1),
		tbEncode(nil, bkMaxTime+1),
		tbEncode(nil, math.MaxInt64),
	})
}

// The token bucket on its full time is GCRA, whatever the clock does: the
// same decision and ttl for every call, from states that differ only in
// their version byte.
func TestTokenBucketIsGCRA(t *testing.T) {
	for _, p := range bkRatePolicies {
		r := rand.New(rand.NewPCG(uint64(p.Limit), 3))
		var tb, g []byte
		now := int64(bkT0)
		for i := range 2000 {
			now = max(now+bkFuzzStep(byte(r.IntN(256)), p.IntervalMicros(), p.WindowMicros()), 0)
			n := bkFuzzCost(byte(r.IntN(256)), p.Capacity())
			tn, tt, td := stepOnce(TokenBucket{}, &p, tb, now, n)
			gn, gt, gd := stepOnce(GCRA{}, &p, g, now, n)
			if td != gd || tt != gt || (tn == nil) != (gn == nil) || (tn != nil && !bytes.Equal(tn[1:], gn[1:])) {
				t.Fatalf("%v call %d (now=t0%+d, n=%d): token bucket %+v ttl %v state %x, GCRA %+v ttl %v state %x", p, i, now-bkT0, n, td, tt, tn, gd, gt, gn)
			}
			if tn != nil {
				tb, g = tn, gn
			}
		}
	}
}

// refBucket is the token bucket as tokens and last, the form the full time
// replaces: whole tokens refilled as intervals pass, last kept at the start
// of the interval in progress (at now once the bucket is full).
type refBucket struct{ tokens, last int64 }

func (r *refBucket) take(now, n int64, p *core.Policy) (allowed bool, remaining int64) {
	b, t := p.Capacity(), p.IntervalMicros()
	if k := (now - r.last) / t; k >= b-r.tokens {
		r.tokens, r.last = b, now
	} else {
		r.tokens, r.last = r.tokens+k, r.last+k*t
	}
	if r.tokens < n {
		return false, r.tokens
	}
	r.tokens -= n
	return true, r.tokens
}

// On a clock that never steps back the full time decides what the bucket
// of tokens and last decides, with the tokens left as Remaining.
func TestTokenBucketCountsTokens(t *testing.T) {
	for _, p := range bkRatePolicies {
		r := rand.New(rand.NewPCG(uint64(p.Limit), 5))
		var state []byte
		now := int64(bkT0)
		ref := refBucket{p.Capacity(), now}
		for i := range 3000 {
			now = min(now+max(0, bkFuzzStep(byte(r.IntN(256)), p.IntervalMicros(), p.WindowMicros())), bkMaxNow)
			n := bkFuzzCost(byte(r.IntN(256)), p.Capacity())
			next, _, d := stepOnce(TokenBucket{}, &p, state, now, n)
			if ok, rem := ref.take(now, n, &p); d.Allowed != ok || d.Remaining != rem {
				t.Fatalf("%v call %d (now=t0%+d, n=%d): %+v; tokens and last: allowed %v, %d left", p, i, now-bkT0, n, d, ok, rem)
			}
			if next != nil {
				state = next
			}
		}
	}
}

func TestTokenBucketZeroAllocs(t *testing.T) { checkZeroAllocs(t, TokenBucket{}, tbPolicy) }

func FuzzTokenBucket(f *testing.F) {
	f.Add(uint32(9), uint32(999), uint32(4), uint32(0), []byte{0, 1, 0, 0, 3, 2, 9, 0, 10, 1, 6, 3, 7, 1, 0, 1})
	f.Add(uint32(0), uint32(59_999), uint32(0), uint32(0), []byte{0, 0, 2, 0, 3, 0, 10, 0, 1, 0, 4, 0, 13, 1})
	f.Add(uint32(2999), uint32(99), uint32(1), uint32(0), []byte{12, 2, 14, 6, 2, 1, 9, 2, 11, 5, 5, 1, 8, 0, 4, 3})
	f.Add(uint32(6), uint32(0), uint32(0), uint32(0), []byte{1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11})
	f.Fuzz(func(t *testing.T, limit, windowMs, burst, maxDelay uint32, ops []byte) {
		p, ok := bkFuzzPolicy(limit, windowMs, burst, maxDelay)
		if !ok {
			return
		}
		bkFuzzRate(t, TokenBucket{}, p, ops, func(t *testing.T, adm []bkAdmission) {
			// Any order of calls: each admission counted at its own now.
			checkIntervalBound(t, "token bucket", adm, func(i int) int64 { return adm[i].now }, p.Capacity(), 0, p.IntervalMicros())
		})
	})
}

func TestTokenBucketLua(t *testing.T) { diffBucket(t, TokenBucket{}, bkRatePolicies, 6, 150) }

func TestTokenBucketLuaServerTime(t *testing.T) { checkServerTime(t, TokenBucket{}, tbPolicy) }

func TestTokenBucketLuaMemory(t *testing.T) {
	checkIntState(t, TokenBucket{}, core.Policy{Limit: core.MaxLimit, Window: 24 * time.Hour, Burst: 1_000_000})
}

// The token bucket's twin is GCRA's: its state is one whole number in
// range, and any other string reads as absent, as undecodable state does
// in the Go step; so does the two-integer state of earlier releases.
func TestTokenBucketLuaMalformedState(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	p := core.Policy{Name: "f", Limit: 5, Window: time.Minute}
	s := TokenBucket{}.Script()
	_, _, want := TokenBucket{}.Step(nil, bkT0, 1, &p)
	full := strconv.FormatInt(bkT0+p.Capacity()*p.IntervalMicros(), 10)
	for _, v := range []string{
		"6" + strconv.FormatInt(bkT0, 10), // tokens + 1 = 6, then last: the old form
		"1" + strconv.FormatInt(bkT0, 10), // an old drained bucket
		full + ".5",                       // not whole
		strconv.FormatInt(bkMaxTime+1, 10),
		"-" + full, // in the past: a full bucket
		full + "x",
		"",
		"not a state",
	} {
		key := freshKey(t, c)
		if err := c.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, bkT0, 1))); got != want {
			t.Errorf("state %q: %+v, want as a fresh key %+v", v, got, want)
		}
	}
	// The full time itself is read: the bucket is empty.
	key := freshKey(t, c)
	c.Set(ctx, key, full, 0)
	if got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, bkT0, 1))); got.Allowed || got.Remaining != 0 {
		t.Errorf("state %q (drained at t0): %+v, want denied", full, got)
	}
}

func TestTokenBucketLuaCluster(t *testing.T) {
	checkOnCluster(t, TokenBucket{}, core.Policy{Name: "c", Limit: 10, Window: 10 * time.Minute, Burst: 4}, nil)
}

func BenchmarkTokenBucketStep(b *testing.B) { benchStep(b, TokenBucket{}, tbPolicy) }

func BenchmarkTokenBucketStepParallel(b *testing.B) { benchStepParallel(b, TokenBucket{}, tbPolicy) }
