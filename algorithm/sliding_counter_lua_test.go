package algorithm

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// scLuaPolicies are winLuaPolicies and limits around the radix R of the
// twin's integer state (scRadix), so that the differential tests see both
// forms and every change between them: a Limit below R keeps the state one
// integer, a larger one writes the wide form while a count is R or more.
func scLuaPolicies() []core.Policy {
	return append(winLuaPolicies(core.MaxLimit),
		core.Policy{Name: "99-per-ms", Limit: 99, Window: time.Millisecond},
		core.Policy{Name: "100-per-ms", Limit: 100, Window: time.Millisecond},
		core.Policy{Name: "216-per-10ms", Limit: 216, Window: 10 * time.Millisecond},
		core.Policy{Name: "999-per-s", Limit: 999, Window: time.Second},
		core.Policy{Name: "1500-per-s", Limit: 1500, Window: time.Second},
		core.Policy{Name: "3914-per-min", Limit: 3914, Window: time.Minute},
	)
}

// scRadix is R = ⌊∛(1000·W)⌋ for W µs: the twin keeps its state as one
// integer while both counts are below R.
func scRadix(w int64) int64 {
	r := int64(math.Cbrt(float64(1000 * w)))
	for r*r*r > 1000*w {
		r--
	}
	for (r+1)*(r+1)*(r+1) <= 1000*w {
		r++
	}
	return r
}

// scLuaForm is the string the twin stores for the Go step's state under a
// window of w µs: "<s + h><l>" with x = (q·R + prev)·R + cur = 1000·h + l
// when prev and cur are below R, else "<t>:<prev>:<cur>" with t the first
// instant of the window with the same q (see lua/sliding-counter.lua).
func scLuaForm(t *testing.T, state []byte, w int64) string {
	t.Helper()
	last, prev, cur, ok := scDecode(state)
	if !ok {
		t.Fatalf("undecodable sliding counter state %x", state)
	}
	s := last - last%w
	q := scMulDiv(prev, last-s, w)
	if r := scRadix(w); prev < r && cur < r {
		x := (q*r+prev)*r + cur
		return fmt.Sprintf("%d%03d", s+x/1000, x%1000)
	}
	if prev > 0 {
		// ⌈q·W/prev⌉, where q·W may pass int64.
		x := new(big.Int).Mul(big.NewInt(q), big.NewInt(w))
		x.Add(x, big.NewInt(prev-1))
		s += x.Quo(x, big.NewInt(prev)).Int64()
	}
	return fmt.Sprintf("%d:%d:%d", s, prev, cur)
}

func TestSlidingCounterLua(t *testing.T) {
	winLuaDiff(t, SlidingCounter{}, scLuaPolicies(), 12, 150)
}

// TestSlidingCounterLuaForm checks, for windows from 1 ms to 30 days, the
// radix R the twin uses, and the state it stores as the counts reach R, with
// a policy of Limit R+1: one integer with prev and cur at R−1 and q at its
// largest, the wide form once cur is R and after the roll-over, where prev is
// R. Each decision is compared with the Go step, and each stored value with
// scLuaForm of the step's state.
func TestSlidingCounterLuaForm(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	s := SlidingCounter{}.Script()
	documented := map[time.Duration]int64{time.Millisecond: 100, time.Second: 1000, time.Minute: 3914, time.Hour: 15326}
	for _, window := range []time.Duration{time.Millisecond, 1001 * time.Microsecond, 10 * time.Millisecond,
		time.Second, time.Minute, time.Hour, 24 * time.Hour, core.MaxWindow} {
		w := int64(window / time.Microsecond)
		r := scRadix(w)
		if want, ok := documented[window]; ok && r != want {
			t.Errorf("R for %v is %d, documented as %d", window, r, want)
		}
		p := core.Policy{Name: "sc", Limit: r + 1, Window: window}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		key := freshKey(t, c)
		start := winBase - winBase%w
		var state []byte
		for i, st := range []struct {
			at, n    int64
			encoding string
		}{
			{w - 1, r - 1, "int"},    // prev 0, cur R−1
			{2*w - 1, r - 1, "int"},  // prev R−1, cur R−1, q R−2
			{2*w - 1, 1, "embstr"},   // cur R
			{2*w + w/2, 1, "embstr"}, // prev R
			{5 * w, r - 1, "int"},    // fresh: prev 0, cur R−1
			{5*w + w/2, 1, "embstr"}, // cur R
		} {
			now := start + st.at
			next, _, want := SlidingCounter{}.Step(clone(state), now, st.n, &p)
			res, _ := runLuaHeld(t, c, s, key, core.NewScriptArgs(&p, now, st.n))
			if got := core.ScriptDecision(res); got != want || !got.Allowed {
				t.Fatalf("%v: call %d: Lua %+v, Go %+v; want both admitted", p, i, got, want)
			}
			state = next
			enc := c.ObjectEncoding(ctx, key).Val()
			if got, want := c.Get(ctx, key).Val(), scLuaForm(t, state, w); got != want || enc != st.encoding {
				t.Errorf("%v: call %d stored %s %q, want %s %q", p, i, enc, got, st.encoding, want)
			}
		}
	}
}

func TestSlidingCounterLuaMemory(t *testing.T) {
	// Policies whose Limit is below R keep one integer in every state. The
	// largest: a window's worth in its last µs, then as much as fits in
	// the last µs of the next (prev·(W−1)/W rounds up to 1).
	ps := []core.Policy{{Limit: 999, Window: time.Second}, {Limit: 3913, Window: time.Minute}}
	for _, p := range winLuaPolicies(core.MaxLimit) {
		if p.Limit < scRadix(p.WindowMicros()) {
			ps = append(ps, p)
		}
	}
	for _, p := range ps {
		for _, name := range []string{"api", "api-v1-users"} {
			p.Name = name
			w := p.WindowMicros()
			steps := []winStep{{at: w - 1, n: p.Limit}}
			if p.Limit > 1 {
				steps = append(steps, winStep{at: 2*w - 1, n: p.Limit - 1})
			}
			u := winLuaUsage(t, SlidingCounter{}, p, steps...)
			if u.keyLen != winKeyLen(name) || u.encoding != "int" || u.usage > 100 {
				t.Errorf("%v: a %d-byte key holds %s %q, MEMORY USAGE %d bytes; want a %d-byte key, int, at most 100",
					p, u.keyLen, u.encoding, u.value, u.usage, winKeyLen(name))
			}
		}
	}

	// The wide form: a realistic time and two nine-digit counts (the
	// previous window's weighs 1 in the last µs of the next).
	p := core.Policy{Name: "api", Limit: core.MaxLimit, Window: 24 * time.Hour}
	w := p.WindowMicros()
	usage, floor := winLuaMemory(t, SlidingCounter{}, p,
		winStep{at: w - 1, n: core.MaxLimit - 1}, winStep{at: 2*w - 1, n: core.MaxLimit - 1})
	// "<16 digits>:<9 digits>:<9 digits>" is a 36-byte embedded string: 64
	// bytes with its header, where the integer 1 costs a 16-byte header.
	if usage-floor > 48 {
		t.Errorf("the state costs %d bytes over the least a value costs, want at most 48", usage-floor)
	}
}

// scPreviousForm is a sliding counter state in the form the twin wrote
// before its state could be one integer: "<newest admission µs>:<prev>:<cur>".
func scPreviousForm(t *testing.T, state []byte) string {
	t.Helper()
	last, prev, cur, ok := scDecode(state)
	if !ok {
		t.Fatalf("undecodable sliding counter state %x", state)
	}
	return fmt.Sprintf("%d:%d:%d", last, prev, cur)
}

func TestSlidingCounterLuaPreviousForm(t *testing.T) {
	winLuaPreviousForm(t, SlidingCounter{}, scLuaPolicies(), scPreviousForm)
}

func TestSlidingCounterLuaLimitChange(t *testing.T) {
	winLuaLimitChange(t, SlidingCounter{}, time.Second, []int64{1, 3, 100, 999, 1000, 1001, 10_000, 1_000_000})
	winLuaLimitChange(t, SlidingCounter{}, time.Millisecond, []int64{1, 2, 99, 100, 101, 1000})
}

func TestSlidingCounterLuaWindowChange(t *testing.T) {
	winLuaWindowChange(t, SlidingCounter{}, winWindowChanges())
}

func TestSlidingCounterLuaServerTime(t *testing.T) {
	winLuaServerTime(t, SlidingCounter{}, core.Policy{Name: "sc", Limit: 5, Window: time.Hour})
}

func TestSlidingCounterLuaCluster(t *testing.T) {
	winLuaCluster(t, SlidingCounter{}, core.Policy{Name: "sc", Limit: 10, Window: time.Hour})
}

func TestSlidingCounterLuaForeignKey(t *testing.T) {
	winLuaForeignKey(t, SlidingCounter{}, core.Policy{Name: "sc", Limit: 5, Window: time.Second})
}

// TestSlidingCounterLuaExactArithmetic compares the twin with the Go step
// where float64 arithmetic would go wrong: products of a count and a time
// past 2^53 whose ⌊a·b/c⌋ float64 rounds up to the next integer. The probes
// were found by search; the test checks that float64 still gets each one
// wrong, so that each keeps its point.
func TestSlidingCounterLuaExactArithmetic(t *testing.T) {
	c := newRedis(t)
	s := SlidingCounter{}.Script()
	p := core.Policy{Name: "sc", Limit: core.MaxLimit, Window: core.MaxWindow}
	w, l := p.WindowMicros(), p.Limit
	start := winBase - winBase%w
	// exact and float64 ⌊a·b/c⌋.
	exact := func(a, b, c int64) int64 {
		x := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		return x.Quo(x, big.NewInt(c)).Int64()
	}
	float := func(a, b, c int64) int64 { return int64(math.Floor(float64(a) * float64(b) / float64(c))) }

	// probe admits prev units in the last µs of a window, then asks for n
	// units at elapsed e into the next, on the twin and the step.
	probe := func(prev, e, n int64) {
		t.Helper()
		key := freshKey(t, c)
		state, _, _ := SlidingCounter{}.Step(nil, start+w-1, prev, &p)
		runLua(t, c, s, key, core.NewScriptArgs(&p, start+w-1, prev))
		_, _, want := SlidingCounter{}.Step(state, start+w+e, n, &p)
		got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, start+w+e, n)))
		if got != want {
			t.Errorf("prev %d, elapsed %d, n=%d:\n Lua %+v\n Go  %+v", prev, e, n, got, want)
		}
	}

	// The estimate prev − ⌊prev·e/W⌋, at and around admission.
	for _, pr := range [][2]int64{
		{571_685_346, 2_462_219_690_200}, {931_067_867, 1_768_585_185_243},
		{542_894_658, 356_791_231_731}, {696_632_776, 2_225_724_850_500},
		{885_549_906, 1_852_674_144_881},
	} {
		prev, e := pr[0], pr[1]
		if float(prev, e, w) == exact(prev, e, w) {
			t.Fatalf("float64 gets ⌊%d·%d/W⌋ right: not a probe", prev, e)
		}
		est := prev - exact(prev, e, w)
		for _, n := range []int64{1, l - est, l - est + 1} {
			probe(prev, e, n)
		}
	}
	// The retry W − ⌊r·W/prev⌋ when n = Limit − r units wait for prev to
	// decay, from the start of the window.
	for _, pr := range [][2]int64{
		{702_146_527, 648_027_071}, {852_948_069, 448_181_129},
		{535_926_691, 456_761_513}, {562_397_336, 553_440_402},
		{973_941_606, 719_553_900},
	} {
		prev, r := pr[0], pr[1]
		if float(r, w, prev) == exact(r, w, prev) {
			t.Fatalf("float64 gets ⌊%d·W/%d⌋ right: not a probe", r, prev)
		}
		probe(prev, 0, l-r)
	}
}

func BenchmarkSlidingCounterLua(b *testing.B) {
	// 100 per second, a call every 3 ms: about a third admitted.
	winLuaBench(b, SlidingCounter{}, core.Policy{Name: "sc", Limit: 100, Window: time.Second}, 3000)
}
