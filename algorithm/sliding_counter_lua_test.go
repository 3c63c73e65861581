package algorithm

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestSlidingCounterLua(t *testing.T) {
	winLuaDiff(t, SlidingCounter{}, winLuaPolicies(core.MaxLimit), 12, 150)
}

func TestSlidingCounterLuaMemory(t *testing.T) {
	// The widest state: a realistic time and two nine-digit counts (the
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
		got := runLua(t, c, s, key, core.NewScriptArgs(&p, start+w+e, n)).Decision()
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
