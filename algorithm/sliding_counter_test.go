package algorithm

import (
	"bytes"
	"math/big"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestSlidingCounterStep(t *testing.T) {
	const s = 1_000_000 // the window, 1 s in µs
	p := core.Policy{Name: "sc", Limit: 10, Window: time.Second}
	winRun(t, SlidingCounter{}, p, []winStep{
		{at: 0, n: 4, want: winAllow(6, 2*s)},
		{at: s / 2, n: 6, want: winAllow(0, 3*s/2)},
		// Full: the current window cannot help, so the retry waits for the
		// next, where 10 previous units weigh ⌈10·(1−e)⌉ ≤ 9 from e = 0.1 s.
		{at: 6 * s / 10, n: 1, want: winDeny(0, s/2, 14*s/10)},
		// Roll-over: prev = 10 weighs 10 at the window's start, 9 from 0.1 s.
		{at: s, n: 1, want: winDeny(0, s/10, s)},
		// At 0.25 s the estimate is 10 − ⌊2.5⌋ = 8; 3 units fit at 0.3 s.
		{at: s + s/4, n: 3, want: winDeny(2, s/20, 3*s/4)},
		{at: s + 3*s/10, n: 3, want: winAllow(0, 17*s/10)},
		// Backwards: stands still at 1.3 s, where the estimate is 3 + 7 =
		// 10; one unit fits at 1.4 s, 0.2 s after this now.
		{at: s + s/5, n: 1, want: winDeny(0, s/5, 18*s/10)},
		// Roll-over: prev = 3 weighs 3 at the window's start.
		{at: 2 * s, n: 7, want: winAllow(0, 2*s)},
		// Two windows on: prev = 7 weighs 7 − ⌊3.5⌋ = 4 halfway.
		{at: 3*s + s/2, n: 6, want: winAllow(0, 3*s/2)},
		// Idle: fresh; n = Limit fits.
		{at: 10 * s, n: 10, want: winAllow(0, 2*s)},
		// n = Limit with cur = 10: not before the window after next.
		{at: 10*s + 1, n: 10, want: winDeny(0, 2*s-1, 2*s-1)},
		// A cost above Limit is never admitted and never told to retry.
		{at: 10*s + 1, n: 11, want: core.Decision{ResetAfter: (2*s - 1) * time.Microsecond}},
	})
}

func TestSlidingCounterLargeNumbers(t *testing.T) {
	// 10^9 per 30 days: prev·elapsed reaches 2.6·10^21, past int64; the
	// estimate is still exact. Checked against big-number arithmetic.
	p := core.Policy{Name: "sc", Limit: core.MaxLimit, Window: core.MaxWindow}
	w, l := p.WindowMicros(), p.Limit
	start := winBase - winBase%w
	state, _, d := SlidingCounter{}.Step(nil, start+w-1, l, &p)
	if !d.Allowed {
		t.Fatalf("fresh: %+v", d)
	}
	for _, e := range []int64{0, 1, 2591, 2592, w / 3, w / 2, w - 7, w - 1} {
		for _, n := range []int64{1, 2, l / 3, l} {
			now := start + w + e
			next, ttl, d := SlidingCounter{}.Step(clone(state), now, n, &p)
			// est = ⌈l·(w−e)/w⌉, by big numbers.
			num := new(big.Int).Mul(big.NewInt(l), big.NewInt(w-e))
			est, rem := new(big.Int).QuoRem(num, big.NewInt(w), new(big.Int))
			if rem.Sign() > 0 {
				est.Add(est, big.NewInt(1))
			}
			if wantOK := est.Int64()+n <= l; d.Allowed != wantOK {
				t.Errorf("elapsed %d, n=%d: allowed %v, want %v (estimate %v)", e, n, d.Allowed, wantOK, est)
			}
			winCheckExact(t, SlidingCounter{}, &p, state, now, n, next, ttl, d)
		}
	}
}

func TestSlidingCounterIdleExpiry(t *testing.T) {
	winCheckExpiry(t, SlidingCounter{}, core.Policy{Name: "sc", Limit: 5, Window: 10 * time.Millisecond})
}

func TestSlidingCounterUndecodable(t *testing.T) {
	p := core.Policy{Name: "sc", Limit: 5, Window: time.Second}
	good, _, _ := SlidingCounter{}.Step(nil, winBase, 1, &p)
	if len(good) != scLen {
		t.Fatalf("state is %d bytes, want %d", len(good), scLen)
	}
	winCheckUndecodable(t, SlidingCounter{}, p, good, [][]byte{
		{},
		{scVersion},
		append([]byte{2}, good[1:]...),
		good[:scLen-1],
		append(bytes.Clone(good), 0),
		winPatch(good, 1, 0x80),
		winPatch(good, 1, 0x00, 0x10),
		winPatch(good, 9, 0xff, 0xff),  // prev above MaxLimit
		winPatch(good, 13, 0xff, 0xff), // cur above MaxLimit
		bytes.Repeat([]byte{0xff}, scLen),
	})
}

// FuzzSlidingCounter drives the step with random clock steps (some
// backwards) and costs, and checks every decision against an independent
// model in exact rational arithmetic: from a record of admitted (time, n),
// prev and cur are the sums over the two aligned windows, and n is admitted
// when prev·(W−elapsed)/W + cur + n <= Limit. It checks the stated bound
// (Limit per aligned window, 2·Limit − ⌈2·Limit/W⌉ per trailing window) and
// that every Remaining, RetryAfter, ResetAfter and TTL is exact.
func FuzzSlidingCounter(f *testing.F) {
	winFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, limit, window, start uint64, ops []byte) {
		p := winFuzzPolicy(limit, window, core.MaxLimit)
		w, l := p.WindowMicros(), p.Limit
		winFuzz(t, SlidingCounter{}, p, start, ops, winModel{
			decide: func(recs []winRec, eff, n int64) (bool, int64) {
				ws := eff - eff%w
				prev, cur := winSum(recs, ws-w, ws), winSum(recs, ws, ws+w)
				// est = (prev·(W−elapsed) + cur·W) / W, exactly.
				est := new(big.Rat).SetFrac(
					new(big.Int).Add(
						new(big.Int).Mul(big.NewInt(prev), big.NewInt(w-(eff-ws))),
						new(big.Int).Mul(big.NewInt(cur), big.NewInt(w))),
					big.NewInt(w))
				ok := est.Cmp(new(big.Rat).SetInt64(l-n)) <= 0
				if ok {
					est.Add(est, new(big.Rat).SetInt64(n))
				}
				// Remaining: the most k with est + k <= Limit.
				free := new(big.Rat).Sub(new(big.Rat).SetInt64(l), est)
				if free.Sign() <= 0 {
					return ok, 0
				}
				return ok, new(big.Int).Quo(free.Num(), free.Denom()).Int64()
			},
			aligned:  l,
			trailing: 2*l - (2*l+w-1)/w,
		})
	})
}

// TestSlidingCounterBoundIsReached shows that the documented trailing-window
// bound is tight: Limit units in the last µs of a window, then
// Limit − ⌈2·Limit/W⌉ units 2 µs before the end of the next.
func TestSlidingCounterBoundIsReached(t *testing.T) {
	for _, p := range []core.Policy{
		{Name: "sc", Limit: 10, Window: time.Second},
		{Name: "sc", Limit: 1, Window: time.Millisecond},
		{Name: "sc", Limit: 999, Window: time.Millisecond},
		{Name: "sc", Limit: 1000, Window: time.Millisecond},
	} {
		w, l := p.WindowMicros(), p.Limit
		start := winBase - winBase%w
		state, _, d := SlidingCounter{}.Step(nil, start+w-1, l, &p)
		if !d.Allowed {
			t.Fatalf("%v: %+v", p, d)
		}
		bound := 2*l - (2*l+w-1)/w
		second := bound - l
		if second > 0 {
			_, _, d = SlidingCounter{}.Step(clone(state), start+2*w-2, second, &p)
			if !d.Allowed {
				t.Errorf("%v: the second batch of %d is denied: %+v", p, second, d)
			}
		}
		if _, _, d := (SlidingCounter{}).Step(clone(state), start+2*w-2, second+1, &p); d.Allowed {
			t.Errorf("%v: %d units admitted at the end of the next window, more than the bound allows", p, second+1)
		}
	}
}

func BenchmarkSlidingCounterStep(b *testing.B) {
	// 100 per second, a call every 3 ms: about a third admitted.
	winBench(b, SlidingCounter{}, core.Policy{Name: "sc", Limit: 100, Window: time.Second}, 3000)
}
