package algorithm

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// 10 per second, burst 2, queued for at most 250ms: T = 100ms, B·T = 200ms,
// Quota = 2 + ⌊250/100⌋ = 4, M mod T = 50ms.
var lbPolicy = core.Policy{Name: "lb", Limit: 10, Window: time.Second, Burst: 2, MaxDelay: 250 * time.Millisecond}

func TestLeakyBucketSteps(t *testing.T) {
	const T = 100_000
	us := time.Microsecond
	state := runCalls(t, LeakyBucket{}, lbPolicy, nil, []bkCall{
		// An empty queue: the first B units start at once...
		{bkT0, 1, admit(4, 3, T/2, 0), T * us},
		{bkT0, 1, admit(4, 2, 3*T/2, 0), 2 * T * us},
		// ...the next ones wait their turn, up to MaxDelay.
		{bkT0, 1, admit(4, 1, 5*T/2, T), 3 * T * us},
		{bkT0, 1, admit(4, 0, 7*T/2, 2*T), 4 * T * us},
		{bkT0, 1, deny(4, 0, T/2, 7*T/2), 0},
		// Exactly RetryAfter later, the same request waits exactly MaxDelay.
		{bkT0 + T/2, 1, admit(4, 0, 4*T, 250_000), 450_000 * us},
		// The clock steps back: nothing drains; the wait counts from the
		// earlier now.
		{bkT0, 1, deny(4, 0, 150_000, 9*T/2), 0},
		// After a quiet period, n = Quota in one request: the units past B
		// wait (n − B)·T.
		{bkT0 + 10_000_000, 4, admit(4, 0, 7*T/2, 2*T), 4 * T * us},
		{bkT0 + 10_000_000, 1, deny(4, 0, T/2, 7*T/2), 0},
		// 1µs before the queue is short enough for a unit to start at once.
		{bkT0 + 10_349_999, 1, admit(4, 2, 100_001, 0), 150_001 * us},
	})
	checkFreshAfterTTL(t, LeakyBucket{}, &lbPolicy, state, bkT0+10_349_999, 150_001*us)
	// ResetAfter is exact: the whole quota is back 100_001µs later, not
	// 100_000.
	for _, c := range []struct {
		at   int64
		want bool
	}{{bkT0 + 10_349_999 + 100_001, true}, {bkT0 + 10_349_999 + 100_000, false}} {
		if _, _, d := stepOnce(LeakyBucket{}, &lbPolicy, state, c.at, 4); d.Allowed != c.want {
			t.Errorf("n = Quota at t0%+d: %+v, want Allowed %v", c.at-bkT0, d, c.want)
		}
	}
}

func TestLeakyBucketQuota(t *testing.T) {
	for _, c := range []struct {
		p    core.Policy
		want int64
	}{
		{lbPolicy, 4},
		{core.Policy{Limit: 10, Window: time.Second}, 20},                                           // MaxDelay = Window
		{core.Policy{Limit: 10, Window: time.Second, MaxDelay: time.Microsecond}, 10},               // no queueing
		{core.Policy{Limit: 10, Window: time.Second, Burst: 3, MaxDelay: 99 * time.Millisecond}, 3}, // MaxDelay < T
		{core.Policy{Limit: 7, Window: time.Second, MaxDelay: 3 * time.Second}, 7 + 3_000_000/142_858},
	} {
		if got := (LeakyBucket{}).Quota(&c.p); got != c.want {
			t.Errorf("Quota(%v, MaxDelay %v) = %d, want %d", c.p, c.p.MaxDelay, got, c.want)
		}
	}
}

// lbPolicies are bkRatePolicies with several MaxDelays each.
func lbPolicies() []core.Policy {
	var ps []core.Policy
	for _, p := range bkRatePolicies {
		for i, md := range []time.Duration{0, time.Microsecond, core.Micros(p.IntervalMicros()) - 1, 2*p.Window + 13*time.Microsecond} {
			if md > core.MaxWindow {
				continue
			}
			q := p
			q.MaxDelay = md
			q.Name = p.Name + "-md" + string(rune('0'+i))
			if q.Validate() == nil {
				ps = append(ps, q)
			}
		}
	}
	return ps
}

func TestLeakyBucketFreshAtOneInstant(t *testing.T) {
	for _, p := range lbPolicies() {
		for seed := range uint64(3) {
			checkAtOneInstant(t, LeakyBucket{}, p, LeakyBucket{}.Quota(&p), seed)
		}
	}
}

func TestLeakyBucketInvalidCost(t *testing.T) {
	for _, n := range []int64{0, -1, 5, math.MaxInt64} {
		runCalls(t, LeakyBucket{}, lbPolicy, nil, []bkCall{{bkT0, n, deny(4, 4, 0, 0), 0}})
	}
}

func TestLeakyBucketUndecodable(t *testing.T) {
	good := lbEncode(nil, bkT0+50)
	checkUndecodable(t, LeakyBucket{}, lbPolicy, [][]byte{
		{},
		{lbVersion},
		good[:len(good)-1],
		append(clone(good), 0),
		append([]byte{gcraVersion}, good[1:]...),
		lbEncode(nil, -1),
		lbEncode(nil, bkMaxTime+1),
	})
}

func TestLeakyBucketZeroAllocs(t *testing.T) { checkZeroAllocs(t, LeakyBucket{}, lbPolicy) }

// lbBound checks both of the leaky bucket's bounds: on decision times, and
// on start times (now + Delay) for every pair of admissions in order.
func lbBound(p core.Policy) func(*testing.T, []bkAdmission) {
	b, iv, m := p.Capacity(), p.IntervalMicros(), p.MaxDelayMicros()
	return func(t *testing.T, adm []bkAdmission) {
		checkIntervalBound(t, "leaky bucket", adm, func(i int) int64 { return adm[i].now }, b, m, iv)
		for i := range adm {
			si := adm[i].now + adm[i].delay
			sum := int64(0)
			for j := i; j < len(adm); j++ {
				sum += adm[j].n
				sj := adm[j].now + adm[j].delay
				if lim := max(b, adm[i].n) + floorDiv(sj-si, iv); sum > lim {
					t.Fatalf("leaky bucket: admissions %d..%d, %d units, start from t0%+d to t0%+d: bound %d", i, j, sum, si-bkT0, sj-bkT0, lim)
				}
			}
		}
	}
}

func FuzzLeakyBucket(f *testing.F) {
	f.Add(uint32(9), uint32(999), uint32(1), uint32(250_000), []byte{0, 1, 0, 0, 0, 0, 3, 2, 9, 0, 10, 1, 6, 3, 7, 1, 0, 1})
	f.Add(uint32(0), uint32(59_999), uint32(0), uint32(0), []byte{0, 0, 2, 0, 3, 0, 10, 0, 1, 0, 4, 0, 13, 1})
	f.Add(uint32(2999), uint32(99), uint32(1), uint32(1), []byte{12, 2, 14, 6, 2, 1, 9, 2, 11, 5, 5, 1, 8, 0, 4, 3})
	f.Add(uint32(6), uint32(0), uint32(0), uint32(77), []byte{1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11})
	f.Add(uint32(3), uint32(1999), uint32(7), uint32(5_000_000), []byte{0, 1, 0, 1, 0, 1, 0, 2, 6, 0, 6, 1, 6, 2, 10, 1, 11, 0, 0, 1})
	f.Fuzz(func(t *testing.T, limit, windowMs, burst, maxDelay uint32, ops []byte) {
		p, ok := bkFuzzPolicy(limit, windowMs, burst, maxDelay)
		if !ok {
			return
		}
		bkFuzzRate(t, LeakyBucket{}, p, ops, lbBound(p))
	})
}

func TestLeakyBucketLua(t *testing.T) { diffBucket(t, LeakyBucket{}, lbPolicies(), 3, 150) }

func TestLeakyBucketLuaServerTime(t *testing.T) { checkServerTime(t, LeakyBucket{}, lbPolicy) }

func TestLeakyBucketLuaMemory(t *testing.T) {
	checkIntState(t, LeakyBucket{}, core.Policy{Limit: core.MaxLimit, Window: 24 * time.Hour, Burst: 1_000_000})
}

func TestLeakyBucketLuaCluster(t *testing.T) {
	checkOnCluster(t, LeakyBucket{}, core.Policy{Name: "c", Limit: 10, Window: 10 * time.Minute, Burst: 2, MaxDelay: 3 * time.Minute}, nil)
}

func BenchmarkLeakyBucketStep(b *testing.B) { benchStep(b, LeakyBucket{}, lbPolicy) }

func BenchmarkLeakyBucketStepParallel(b *testing.B) { benchStepParallel(b, LeakyBucket{}, lbPolicy) }

// Quota of a Policy that Validate refuses answers without panicking, as
// Policy's derived values do.
func TestLeakyBucketQuotaOfAnInvalidPolicy(t *testing.T) {
	for _, alg := range All() {
		for _, p := range []core.Policy{{}, {Limit: -5, Window: time.Second}, {Window: time.Second}} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s: Quota(%v) panicked: %v", alg.Name(), p, r)
					}
				}()
				alg.Quota(&p)
			}()
		}
	}
}

// A refund gives a queued charge's place back only while nothing queued
// behind it: the starts already given stay one interval apart. Queue A, B
// and C behind a first request at one instant (T = 100 ms, B = 1); B's
// refund gives nothing (C holds the start after it); C's gives its whole
// place, and the next request is given C's start, not B's.
func TestLeakyBucketRefundKeepsTheQueueShaped(t *testing.T) {
	p := &core.Policy{Name: "q", Limit: 10, Window: time.Second, Burst: 1, MaxDelay: time.Second}
	lb := LeakyBucket{}
	const now = int64(1_700_000_000_000_000)
	var state []byte
	type charge struct {
		at, mark int64
		d        core.Decision
	}
	take := func(at int64) charge {
		t.Helper()
		next, _, d := lb.Step(state, at, 1, p)
		if !d.Allowed {
			t.Fatalf("charge at %d refused: %+v", at, d)
		}
		state = next
		return charge{at, lb.Mark(d, at, p), d}
	}
	take(now) // starts at once
	take(now) // A: 100 ms
	b := take(now)
	c := take(now)
	if b.d.Delay != 200*time.Millisecond || c.d.Delay != 300*time.Millisecond {
		t.Fatalf("delays %v and %v, want 200ms and 300ms", b.d.Delay, c.d.Delay)
	}
	at := now + 20_000 // the refunds come 20 ms later
	if next, _, k := lb.Refund(state, at, b.at, b.mark, 1, p); next != nil || k != 0 {
		t.Fatalf("B's refund with C queued behind it: %d units back, want none", k)
	}
	next, _, k := lb.Refund(state, at, c.at, c.mark, 1, p)
	if next == nil || k != 1 {
		t.Fatalf("C's refund, last in the queue: %d units back, want its place", k)
	}
	state = next
	if _, _, d := lb.Step(state, at, 1, p); !d.Allowed || d.Delay != 280*time.Millisecond {
		t.Fatalf("the next request: %+v, want admitted to start at C's start (280ms from now)", d)
	}
}

// A refund at the instant of its charge gives the whole place back, also
// when MaxDelay is not a whole number of intervals (the mark is the drain
// time the charge left, exactly): the next request starts where the
// refunded one would have.
func TestLeakyBucketRefundGivesTheWholePlace(t *testing.T) {
	lb := LeakyBucket{}
	const now = int64(1_700_000_000_000_000)
	for _, maxDelay := range []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 190 * time.Millisecond, 250 * time.Millisecond} {
		p := &core.Policy{Name: "q", Limit: 10, Window: time.Second, Burst: 1, MaxDelay: maxDelay}
		var state []byte
		for range 2 { // the first starts at once, the second is queued; each is refunded, and charged for good
			next, _, d := lb.Step(state, now, 1, p)
			if !d.Allowed {
				t.Fatalf("MaxDelay %v: refused %+v", maxDelay, d)
			}
			refunded, _, k := lb.Refund(next, now, now, lb.Mark(d, now, p), 1, p)
			if k != 1 {
				t.Fatalf("MaxDelay %v: refund gave %d", maxDelay, k)
			}
			if _, _, again := lb.Step(refunded, now, 1, p); again.Delay != d.Delay {
				t.Errorf("MaxDelay %v: after the refund of a request given %v, the next waits %v: the place came back in part", maxDelay, d.Delay, again.Delay)
			}
			state = next
		}
	}
}
