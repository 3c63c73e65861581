package algorithm

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestFixedWindowStep(t *testing.T) {
	const s = 1_000_000 // the window, 1 s in µs
	p := core.Policy{Name: "fw", Limit: 3, Window: time.Second}
	winRun(t, FixedWindow{}, p, []winStep{
		{at: 0, n: 1, want: winAllow(2, s)},
		{at: 100, n: 2, want: winAllow(0, s-100)},
		{at: 200, n: 1, want: winDeny(0, s-200, s-200)},
		{at: s - 1, n: 1, want: winDeny(0, 1, 1)},
		// Roll-over: a new window, whole again; n = Limit fits.
		{at: s, n: 3, want: winAllow(0, s)},
		// Backwards into the previous window: stands still at s, full.
		{at: s - 500, n: 1, want: winDeny(0, s+500, s+500)},
		{at: 2*s + s/2, n: 2, want: winAllow(1, s/2)},
		// Backwards inside the window: the same window, one unit left.
		{at: 2*s + s/4, n: 1, want: winAllow(0, 3*s/4)},
		{at: 2*s + s/4, n: 1, want: winDeny(0, 3*s/4, 3*s/4)},
		// Long idle: fresh.
		{at: 10 * s, n: 2, want: winAllow(1, s)},
		// A cost above Limit is never admitted and never told to retry.
		{at: 10 * s, n: 4, want: core.Decision{Remaining: 1, ResetAfter: s * time.Microsecond}},
	})
}

func TestFixedWindowUnalignedWindow(t *testing.T) {
	// Windows of 7 ms are aligned to multiples of 7000 µs since the epoch,
	// not to winBase (a multiple of 1 s): the first ends 6000 µs in, as
	// 1_700_000_000_000_000 = 7000·242_857_142_857 + 1000.
	p := core.Policy{Name: "fw", Limit: 2, Window: 7 * time.Millisecond}
	winRun(t, FixedWindow{}, p, []winStep{
		{at: 0, n: 2, want: winAllow(0, 6000)},
		{at: 5999, n: 1, want: winDeny(0, 1, 1)},
		{at: 6000, n: 1, want: winAllow(1, 7000)},
	})
}

func TestFixedWindowIdleExpiry(t *testing.T) {
	winCheckExpiry(t, FixedWindow{}, core.Policy{Name: "fw", Limit: 5, Window: 10 * time.Millisecond})
}

func TestFixedWindowUndecodable(t *testing.T) {
	good, _, _ := FixedWindow{}.Step(nil, winBase, 1, &core.Policy{Name: "fw", Limit: 5, Window: time.Second})
	if len(good) != fwLen {
		t.Fatalf("state is %d bytes, want %d", len(good), fwLen)
	}
	winCheckUndecodable(t, FixedWindow{}, core.Policy{Name: "fw", Limit: 5, Window: time.Second}, good, [][]byte{
		{},
		{fwVersion},
		append([]byte{2}, good[1:]...),    // unknown version
		good[:fwLen-1],                    // short
		append(bytes.Clone(good), 0),      // long
		winPatch(good, 1, 0x80),           // newest time negative
		winPatch(good, 1, 0x00, 0x10),     // newest time past winMaxNow
		winPatch(good, 9, 0xff, 0xff),     // count above MaxLimit
		bytes.Repeat([]byte{0xff}, fwLen), // garbage
	})
}

// FuzzFixedWindow drives the step with random clock steps (some backwards)
// and costs, and checks every decision against an independent model: a
// record of admitted (time, n), where n is admitted exactly when the aligned
// window holding now has room. It also checks the stated bound (Limit per
// aligned window, 2·Limit per trailing window) and that every Remaining,
// RetryAfter, ResetAfter and TTL is exact.
func FuzzFixedWindow(f *testing.F) {
	winFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, limit, window, start uint64, ops []byte) {
		p := winFuzzPolicy(limit, window, core.MaxLimit)
		w, l := p.WindowMicros(), p.Limit
		winFuzz(t, FixedWindow{}, p, start, ops, winModel{
			decide: func(recs []winRec, eff, n int64) (bool, int64) {
				ws := eff - eff%w
				used := winSum(recs, ws, ws+w)
				ok := used+n <= l
				if ok {
					used += n
				}
				return ok, max(0, l-used)
			},
			aligned:  l,
			trailing: 2 * l,
		})
	})
}

func BenchmarkFixedWindowStep(b *testing.B) {
	// 100 per second, a call every 3 ms: about a third admitted.
	winBench(b, FixedWindow{}, core.Policy{Name: "fw", Limit: 100, Window: time.Second}, 3000)
}

// The helpers below are shared by the tests of the three window algorithms
// (fixed window, sliding log, sliding counter).

// winBase is the instant the table tests start from: a multiple of 1 s and
// of 10 ms, near today.
const winBase int64 = 1_700_000_000_000_000

// winStep is one call of a table test, at winBase + at.
type winStep struct {
	at   int64 // µs after winBase
	n    int64
	want core.Decision // Limit is filled in from the policy
}

func winAllow(remaining, resetUs int64) core.Decision {
	return core.Decision{Allowed: true, Remaining: remaining, ResetAfter: core.Micros(resetUs)}
}

func winDeny(remaining, retryUs, resetUs int64) core.Decision {
	return core.Decision{Remaining: remaining, RetryAfter: core.Micros(retryUs), ResetAfter: core.Micros(resetUs)}
}

// winRun runs steps in order on one key and checks each decision, that a
// denial writes nothing, and (winCheckExact) that every figure is exact.
func winRun(t *testing.T, alg core.Algorithm, p core.Policy, steps []winStep) {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	var state []byte
	for i, s := range steps {
		now := winBase + s.at
		next, ttl, got := alg.Step(clone(state), now, s.n, &p)
		want := s.want
		want.Limit = p.Limit
		if got != want {
			t.Fatalf("step %d (at +%dµs, n=%d):\n got %+v\nwant %+v", i, s.at, s.n, got, want)
		}
		winCheckExact(t, alg, &p, state, now, s.n, next, ttl, got)
		if next != nil {
			state = next
		}
	}
}

// winCheckExact checks what the contract promises about one decision d of n
// units at now on state pre, which returned next and ttl:
//   - an admission writes a state with a positive TTL, a denial writes none;
//   - Remaining units would be admitted right after, Remaining+1 would not;
//   - a denied retry of n at now+RetryAfter is admitted, 1 µs sooner it is
//     not (RetryAfter is 0 for an admission);
//   - Limit units are admitted at now+ResetAfter, 1 µs sooner they are not;
//   - at now+ttl, the state decides and writes exactly as no state.
//
// It re-runs the step on copies; it never changes pre or next.
func winCheckExact(t *testing.T, alg core.Algorithm, p *core.Policy, pre []byte, now, n int64, next []byte, ttl time.Duration, d core.Decision) {
	t.Helper()
	l := alg.Quota(p)
	post := pre
	if next != nil {
		post = next
	}
	step := func(s []byte, at, k int64) ([]byte, core.Decision) {
		next, _, d := alg.Step(clone(s), at, k, p)
		return next, d
	}
	us := func(d time.Duration) int64 { return int64(d / time.Microsecond) }

	if d.Allowed != (next != nil) {
		t.Fatalf("at %d n=%d: Allowed=%v but next=%x", now, n, d.Allowed, next)
	}
	if next != nil && ttl <= 0 {
		t.Fatalf("at %d n=%d: wrote a state with ttl %v", now, n, ttl)
	}
	if d.Remaining < 0 || d.Remaining > l {
		t.Fatalf("at %d: Remaining %d outside 0..%d", now, d.Remaining, l)
	}
	if d.Remaining > 0 {
		if _, e := step(post, now, d.Remaining); !e.Allowed {
			t.Fatalf("at %d: Remaining is %d but %d units are denied: %+v", now, d.Remaining, d.Remaining, e)
		}
	}
	if d.Remaining < l {
		if _, e := step(post, now, d.Remaining+1); e.Allowed {
			t.Fatalf("at %d: Remaining is %d but %d units are admitted", now, d.Remaining, d.Remaining+1)
		}
	}

	ra := us(d.RetryAfter)
	switch {
	case d.Allowed || n < 1 || n > l:
		if ra != 0 {
			t.Fatalf("at %d n=%d: RetryAfter %v, want 0 (allowed=%v)", now, n, d.RetryAfter, d.Allowed)
		}
	case ra <= 0:
		t.Fatalf("at %d n=%d: denied with RetryAfter %v", now, n, d.RetryAfter)
	default:
		if _, e := step(pre, now+ra, n); !e.Allowed {
			t.Fatalf("at %d n=%d: a retry after RetryAfter=%v is denied: %+v", now, n, d.RetryAfter, e)
		}
		if _, e := step(pre, now+ra-1, n); e.Allowed {
			t.Fatalf("at %d n=%d: a retry 1µs before RetryAfter=%v is admitted", now, n, d.RetryAfter)
		}
	}

	rs := us(d.ResetAfter)
	if rs < 0 {
		t.Fatalf("at %d: ResetAfter %v", now, d.ResetAfter)
	}
	if _, e := step(post, now+rs, l); !e.Allowed {
		t.Fatalf("at %d: Limit units are denied after ResetAfter=%v: %+v", now, d.ResetAfter, e)
	}
	if rs > 0 {
		if _, e := step(post, now+rs-1, l); e.Allowed {
			t.Fatalf("at %d: Limit units are admitted 1µs before ResetAfter=%v", now, d.ResetAfter)
		}
	}

	if ttl > 0 {
		at := now + us(ttl)
		for _, k := range []int64{1, l} {
			gotNext, got := step(post, at, k)
			wantNext, want := step(nil, at, k)
			if got != want || !bytes.Equal(gotNext, wantNext) {
				t.Fatalf("at %d: the state is not fresh after its ttl %v: n=%d decides %+v, writes %x; no state decides %+v, writes %x",
					now, ttl, k, got, gotNext, want, wantNext)
			}
		}
	}
}

// winCheckExpiry checks that a key left idle reads as fresh exactly when its
// TTL says, not a µs before.
func winCheckExpiry(t *testing.T, alg core.Algorithm, p core.Policy) {
	t.Helper()
	l := alg.Quota(&p)
	now := winBase + 1234
	state, ttl, d := alg.Step(nil, now, l, &p)
	if !d.Allowed || ttl <= 0 {
		t.Fatalf("first call: %+v, ttl %v", d, ttl)
	}
	at := now + int64(ttl/time.Microsecond)
	_, _, fresh := alg.Step(nil, at, l, &p)
	if _, _, got := alg.Step(clone(state), at, l, &p); got != fresh {
		t.Errorf("at the ttl: %+v, want as fresh %+v", got, fresh)
	}
	if _, _, got := alg.Step(clone(state), at-1, l, &p); got.Allowed {
		t.Errorf("1µs before the ttl %v the key already reads as fresh: %+v", ttl, got)
	}
}

// winCheckUndecodable checks that each bad state decides and writes exactly
// as no state, at a few instants around the time good was written.
func winCheckUndecodable(t *testing.T, alg core.Algorithm, p core.Policy, good []byte, bad [][]byte) {
	t.Helper()
	for i, s := range bad {
		if bytes.Equal(s, good) {
			t.Fatalf("bad state %d equals the good one", i)
		}
		for _, at := range []int64{winBase - 1, winBase, winBase + 1, winBase + p.WindowMicros()/2} {
			for _, n := range []int64{1, p.Limit} {
				gotNext, _, got := alg.Step(clone(s), at, n, &p)
				wantNext, _, want := alg.Step(nil, at, n, &p)
				if got != want || !bytes.Equal(gotNext, wantNext) {
					t.Fatalf("bad state %d (%x) at %d n=%d: decides %+v, writes %x; want as absent %+v, %x",
						i, s, at, n, got, gotNext, want, wantNext)
				}
			}
		}
	}
	// The good state is read: it is not just ignored.
	_, _, d := alg.Step(clone(good), winBase, p.Limit, &p)
	if d.Allowed {
		t.Fatalf("the good state %x admits a full quota: it was not read", good)
	}
}

// winPatch returns a copy of b with bytes from off replaced.
func winPatch(b []byte, off int, with ...byte) []byte {
	c := bytes.Clone(b)
	copy(c[off:], with)
	return c
}

// winRec is one admission in a fuzz run's independent record.
type winRec struct{ t, n int64 }

// winSum is the units recorded in [from, to).
func winSum(recs []winRec, from, to int64) int64 {
	var s int64
	for _, r := range recs {
		if r.t >= from && r.t < to {
			s += r.n
		}
	}
	return s
}

// winModel is an independent model of an algorithm for winFuzz.
type winModel struct {
	// decide says whether n units are admitted at eff given the record of
	// admissions so far, and the Remaining after the decision.
	decide func(recs []winRec, eff, n int64) (ok bool, remaining int64)
	// aligned bounds the units in every aligned window [kW, (k+1)W), and
	// trailing those in every trailing window (t−W, t].
	aligned, trailing int64
}

// winFuzzPolicy maps fuzz inputs to a valid policy: any window from 1 ms to
// 30 days in µs, any limit from 1 to min(window in µs, maxLimit).
func winFuzzPolicy(limit, window uint64, maxLimit int64) core.Policy {
	maxW := uint64(core.MaxWindow / time.Microsecond)
	w := int64(1000 + window%(maxW-999))
	l := 1 + int64(limit%uint64(min(w, maxLimit)))
	return core.Policy{Name: "fuzz", Limit: l, Window: core.Micros(w)}
}

// winFuzzSeeds adds the seed corpus shared by the three fuzz targets: tiny
// and huge windows, Limit 1, Limit = window in µs, Limit not dividing the
// window, and op strings mixing roll-overs, backward steps and full costs.
func winFuzzSeeds(f *testing.F) {
	mixed := []byte{
		0, 0, 0, 0, 0, 6, 1, 0, 0, 6, 0, 6, 7, 0, 6, 11, 0, 0, 12, 0, 4,
		3, 0, 1, 14, 90, 5, 4, 0, 2, 8, 0, 6, 13, 0, 0, 2, 0, 1, 5, 0, 7,
		9, 0, 6, 15, 200, 3, 6, 0, 0, 7, 0, 7, 10, 0, 6, 1, 0, 4, 14, 250, 0,
	}
	boundary := []byte{6, 0, 6, 1, 0, 6, 5, 0, 6, 2, 0, 0, 2, 0, 0, 11, 0, 6, 7, 0, 6}
	f.Add(uint64(0), uint64(0), uint64(0), mixed)                    // 1 per 1 ms
	f.Add(uint64(2), uint64(9000), uint64(5), mixed)                 // 3 per 10 ms
	f.Add(uint64(6), uint64(6000), uint64(6999), boundary)           // 7 per 7 ms, start at a boundary
	f.Add(uint64(999), uint64(0), uint64(1), mixed)                  // 1000 per 1 ms: one per µs
	f.Add(uint64(99), uint64(999_000), uint64(123_456), mixed)       // 100 per 1 s
	f.Add(uint64(core.MaxLimit-1), uint64(1<<62), uint64(7), mixed)  // up to 10^9 over days
	f.Add(uint64(999_999_936), uint64(2_591_999_999_000), uint64(0), // 999999937 per 30 days
		boundary)
}

// winFuzzStep maps an op's first two bytes to a clock step: zero, tiny, a
// fraction of the window, around a boundary, several windows, or backwards.
func winFuzzStep(kind, frac byte, w int64) int64 {
	switch kind % 16 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return 2
	case 3:
		return w / 3
	case 4:
		return w / 2
	case 5:
		return w - 2
	case 6:
		return w - 1
	case 7:
		return w
	case 8:
		return w + 1
	case 9:
		return 2 * w
	case 10:
		return 3*w + int64(frac)
	case 11:
		return -1
	case 12:
		return -w / 4
	case 13:
		return -w - int64(frac)
	case 14:
		return w * int64(frac) / 256
	default:
		return int64(frac) * (w/1000 + 1)
	}
}

// winFuzzCost maps an op's third byte to a cost from 1 to l.
func winFuzzCost(c byte, l int64) int64 {
	switch c % 8 {
	case 4, 5:
		return 1 + int64(c/8)%l
	case 6:
		return l
	case 7:
		return max(1, l/2)
	default:
		return 1
	}
}

// winFuzz runs the ops that data encodes (three bytes each, at most 300)
// through alg on one key, from a start near today, and checks each decision
// against m, the bounds of m against the record of admissions, and the
// exactness of every figure (winCheckExact).
//
// The clock may step backwards. The algorithms read that as standing still
// at the newest admission, so the record places each admission at
// max(now, newest admission): the bounds hold on that clock.
func winFuzz(t *testing.T, alg core.Algorithm, p core.Policy, start uint64, data []byte, m winModel) {
	if err := p.Validate(); err != nil {
		t.Fatalf("policy %v: %v", p, err)
	}
	if c, ok := alg.(core.PolicyChecker); ok {
		if err := c.CheckPolicy(&p); err != nil {
			t.Fatalf("policy %v: %v", p, err)
		}
	}
	w, l := p.WindowMicros(), alg.Quota(&p)
	now := winBase + int64(start%uint64(4*w))
	newest := int64(-1)
	var state []byte
	var recs []winRec
	for i := 0; i+3 <= len(data) && i < 3*300; i += 3 {
		now = max(0, now+winFuzzStep(data[i], data[i+1], w))
		n := winFuzzCost(data[i+2], l)
		eff := max(now, newest)
		wantOK, wantRemaining := m.decide(recs, eff, n)
		next, ttl, d := alg.Step(clone(state), now, n, &p)
		if d.Allowed != wantOK || d.Remaining != wantRemaining || d.Limit != l {
			t.Fatalf("%v, op %d at %d (eff %d), n=%d: got %+v; the model says allowed=%v remaining=%d\nrecord: %v",
				p, i/3, now, eff, n, d, wantOK, wantRemaining, recs)
		}
		winCheckExact(t, alg, &p, state, now, n, next, ttl, d)
		if !d.Allowed {
			continue
		}
		state, newest = next, eff
		recs = append(recs, winRec{eff, n})
		if m.aligned > 0 {
			ws := eff - eff%w
			if s := winSum(recs, ws, ws+w); s > m.aligned {
				t.Fatalf("%v: %d units in the aligned window at %d, bound %d\nrecord: %v", p, s, ws, m.aligned, recs)
			}
		}
		// A trailing window holds the most when it ends at an admission.
		if s := winSum(recs, eff-w+1, eff+1); s > m.trailing {
			t.Fatalf("%v: %d units in the trailing window ending at %d, bound %d\nrecord: %v", p, s, eff, m.trailing, recs)
		}
	}
}

// winBench measures Step on an existing key: one call every dt µs, with the
// state written back in place as a store would. The parallel variant gives
// each goroutine a key of its own, as a store's callers have.
func winBench(b *testing.B, alg core.Algorithm, p core.Policy, dt int64) {
	type key struct {
		state []byte
		now   int64
	}
	step := func(k *key) {
		k.now += dt
		if s, _, _ := alg.Step(k.state, k.now, 1, &p); s != nil {
			k.state = s
		}
	}
	// warm brings a key to its steady state, so that the measured calls
	// find a full-grown state, as on a busy key.
	warm := func() *key {
		k := &key{now: winBase}
		for range 10_000 {
			step(k)
		}
		return k
	}
	b.Run("serial", func(b *testing.B) {
		k := warm()
		b.ReportAllocs()
		for b.Loop() {
			step(k)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		keys := make(chan *key, runtime.GOMAXPROCS(0))
		for range cap(keys) {
			keys <- warm()
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			k := <-keys
			for pb.Next() {
				step(k)
			}
		})
	})
}
