package algorithm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// TestLimitChangeNeverExceedsTheLarger changes a key's limit at random
// moments between a small and a large policy (the same Window; the large
// one at least the small one in Limit, Burst and MaxDelay, and for the
// token bucket, GCRA and the leaky bucket in Burst/Limit too), as a tier
// change does at runtime, and checks every admission against the large
// policy's bound: per aligned window (fixed window, sliding counter,
// calendar period), per trailing window (sliding log), per interval (the
// buckets: Burst + ⌊d/T⌋, plus MaxDelay for the leaky bucket). The
// counters are never reset.
func TestLimitChangeNeverExceedsTheLarger(t *testing.T) {
	w := time.Second
	wus := int64(w / time.Microsecond)
	for _, alg := range append(multiAlgs(), Calendar{Period: Day, Location: time.UTC}) {
		if _, ok := alg.(Calendar); ok {
			w, wus = 24*time.Hour, int64(24*time.Hour/time.Microsecond)
		} else {
			w, wus = time.Second, int64(time.Second/time.Microsecond)
		}
		t.Run(alg.Name(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(4, uint64(len(alg.Name()))))
			for round := 0; round < 40; round++ {
				small := core.Policy{Name: "x", Limit: 1 + r.Int64N(5), Window: w}
				large := core.Policy{Name: "x", Limit: small.Limit + r.Int64N(6), Window: w}
				small.Burst = small.Limit + r.Int64N(3)
				large.Burst = max(large.Limit, small.Burst) + r.Int64N(3)
				small.MaxDelay, large.MaxDelay = w/4, w/2
				switch alg.(type) {
				case TokenBucket, GCRA, LeakyBucket:
					// Their state is a time: the larger bucket must also be
					// at least as deep in time (Burst/Limit), as when a
					// tier scales Limit and Burst together.
					for large.Burst*small.Limit < small.Burst*large.Limit {
						large.Burst++
					}
				}
				var state []byte
				type adm struct{ at, n int64 }
				var log []adm
				now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMicro() - wus/2
				p := &small
				for step := 0; step < 400; step++ {
					now += []int64{0, 1, wus / 50, wus / 10, wus / 3}[r.IntN(5)]
					if r.IntN(8) == 0 {
						if p == &small {
							p = &large
						} else {
							p = &small
						}
					}
					n := 1 + r.Int64N(2)
					if n > alg.Quota(p) {
						n = 1
					}
					next, _, d := alg.Step(clone(state), now, n, p)
					if d.Allowed {
						state = next
						log = append(log, adm{now, n})
					}
				}
				check := func(what string, from, to int64, bound int64) {
					var sum int64
					for _, a := range log {
						if a.at >= from && a.at < to {
							sum += a.n
						}
					}
					if sum > bound {
						t.Fatalf("round %d: %s [%d, %d): %d admitted; the larger limit (%v) allows %d", round, what, from, to, sum, large, bound)
					}
				}
				switch a := alg.(type) {
				case FixedWindow, SlidingCounter:
					for _, a := range log {
						s := a.at - a.at%wus
						check("aligned window", s, s+wus, large.Limit)
					}
				case Calendar:
					for _, x := range log {
						_, s, e, _ := a.Bounds(x.at)
						check("day", s, e, large.Limit)
					}
				case SlidingLog:
					for _, a := range log {
						check("trailing window", a.at-wus+1, a.at+1, large.Limit)
					}
				default:
					iv := large.IntervalMicros()
					extra := int64(0)
					if _, ok := alg.(LeakyBucket); ok {
						extra = large.MaxDelayMicros()
					}
					for i, a := range log {
						for _, b := range log[i:] {
							check("interval", a.at, b.at+1, large.Capacity()+(b.at-a.at+extra)/iv)
						}
					}
				}
			}
		})
	}
}
