package algorithm

import (
	"math"
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
		// The clock steps back: nothing is refilled or refunded, and the
		// retry time counts from the earlier now.
		{bkT0 + 100_000, 1, deny(5, 0, 200_000, 600_000), 0},
		// 1µs short of a token, then exactly on it.
		{bkT0 + 299_999, 1, deny(5, 0, 1, 400_001), 0},
		{bkT0 + 300_000, 1, admit(5, 0, 5*T, 0), 500 * ms},
		// Long idle: full again; n = B takes it all at once.
		{bkT0 + 10_000_000, 5, admit(5, 0, 5*T, 0), 500 * ms},
		{bkT0 + 10_000_000, 1, deny(5, 0, T, 5*T), 0},
		// 2.5 intervals: two tokens, half an interval kept in last.
		{bkT0 + 10_250_000, 1, admit(5, 1, 350_000, 0), 350 * ms},
		{bkT0 + 10_299_999, 1, admit(5, 0, 400_001, 0), 400_001 * time.Microsecond},
		{bkT0 + 10_299_999, 5, deny(5, 0, 400_001, 400_001), 0},
		// Refilled past full: the bucket holds B, and the fraction is
		// dropped (last moves to now).
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

func TestTokenBucketShrunkPolicy(t *testing.T) {
	// Written under a burst of 9, read under a burst of 5: a full bucket.
	state := tbEncode(nil, 9, bkT0)
	runCalls(t, TokenBucket{}, tbPolicy, state, []bkCall{
		{bkT0, 5, admit(5, 0, 500_000, 0), 500 * time.Millisecond},
	})
}

func TestTokenBucketInvalidCost(t *testing.T) {
	for _, n := range []int64{0, -1, 6, math.MaxInt64} {
		runCalls(t, TokenBucket{}, tbPolicy, nil, []bkCall{{bkT0, n, deny(5, 5, 0, 0), 0}})
	}
}

func TestTokenBucketUndecodable(t *testing.T) {
	good := tbEncode(nil, 2, bkT0-50)
	checkUndecodable(t, TokenBucket{}, tbPolicy, [][]byte{
		{},
		{tbVersion},
		good[:len(good)-1],
		append(clone(good), 0),
		append([]byte{gcraVersion}, good[1:]...),
		tbEncode(nil, 2, -1),
		tbEncode(nil, 2, bkMaxTime+1),
	})
}

func TestTokenBucketZeroAllocs(t *testing.T) { checkZeroAllocs(t, TokenBucket{}, tbPolicy) }

// tbBound checks the token bucket's bound: each admission counted at its
// effective time, max(now, the latest now of the admissions before it).
func tbBound(p core.Policy) func(*testing.T, []bkAdmission) {
	return func(t *testing.T, adm []bkAdmission) {
		eff := make([]int64, len(adm))
		h := int64(math.MinInt64)
		for i, a := range adm {
			eff[i] = max(a.now, h)
			h = max(h, a.now)
		}
		checkIntervalBound(t, "token bucket", adm, func(i int) int64 { return eff[i] }, p.Capacity(), 0, p.IntervalMicros())
	}
}

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
		bkFuzzRate(t, TokenBucket{}, p, ops, tbBound(p))
	})
}

func TestTokenBucketLua(t *testing.T) { diffBucket(t, TokenBucket{}, bkRatePolicies, 6, 150) }

func TestTokenBucketLuaServerTime(t *testing.T) { checkServerTime(t, TokenBucket{}, tbPolicy) }

func TestTokenBucketLuaMemory(t *testing.T) {
	p := core.Policy{Limit: core.MaxLimit, Window: 24 * time.Hour, Burst: 920}
	checkIntState(t, TokenBucket{}, p)
	// Past 920 tokens the state is a string of up to 26 bytes.
	p.Burst = core.MaxLimit
	_, usage, enc := memoryUsage(t, TokenBucket{}, p, "rl")
	t.Logf("burst %d: stored as %q, MEMORY USAGE %d bytes", p.Burst, enc, usage)
}

func TestTokenBucketLuaCluster(t *testing.T) {
	checkOnCluster(t, TokenBucket{}, core.Policy{Name: "c", Limit: 10, Window: 10 * time.Minute, Burst: 4}, nil)
}

func BenchmarkTokenBucketStep(b *testing.B) { benchStep(b, TokenBucket{}, tbPolicy) }

func BenchmarkTokenBucketStepParallel(b *testing.B) { benchStepParallel(b, TokenBucket{}, tbPolicy) }
