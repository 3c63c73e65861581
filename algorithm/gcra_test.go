package algorithm

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// 10 per second with a burst of 5: T = 100ms, B = 5 (as tbPolicy).
var gcraPolicy = core.Policy{Name: "gcra", Limit: 10, Window: time.Second, Burst: 5}

func TestGCRASteps(t *testing.T) {
	const T = 100_000
	ms := time.Millisecond
	state := runCalls(t, GCRA{}, gcraPolicy, nil, []bkCall{
		// A fresh key: TAT = now.
		{bkT0, 1, admit(5, 4, T, 0), 100 * ms},
		{bkT0, 4, admit(5, 0, 5*T, 0), 500 * ms},
		{bkT0, 1, deny(5, 0, T, 5*T), 0},
		// 1.5 intervals later: TAT − now = 3.5 intervals, so one unit fits
		// and the second in half an interval.
		{bkT0 + 150_000, 2, deny(5, 1, 50_000, 350_000), 0},
		{bkT0 + 200_000, 2, admit(5, 0, 5*T, 0), 500 * ms},
		// The clock steps back: judged at the earlier now, TAT unchanged.
		{bkT0 + 100_000, 1, deny(5, 0, 200_000, 600_000), 0},
		{bkT0 + 299_999, 1, deny(5, 0, 1, 400_001), 0},
		{bkT0 + 300_000, 1, admit(5, 0, 5*T, 0), 500 * ms},
		// Long idle: TAT is in the past; n = B passes at once.
		{bkT0 + 10_000_000, 5, admit(5, 0, 5*T, 0), 500 * ms},
		{bkT0 + 10_000_000, 1, deny(5, 0, T, 5*T), 0},
		{bkT0 + 10_250_000, 1, admit(5, 1, 350_000, 0), 350 * ms},
		{bkT0 + 10_299_999, 1, admit(5, 0, 400_001, 0), 400_001 * time.Microsecond},
		{bkT0 + 10_299_999, 5, deny(5, 0, 400_001, 400_001), 0},
	})
	checkFreshAfterTTL(t, GCRA{}, &gcraPolicy, state, bkT0+10_299_999, 400_001*time.Microsecond)
}

func TestGCRAFreshAtOneInstant(t *testing.T) {
	for _, p := range bkRatePolicies {
		for seed := range uint64(5) {
			checkAtOneInstant(t, GCRA{}, p, p.Capacity(), seed)
		}
	}
}

func TestGCRAInvalidCost(t *testing.T) {
	for _, n := range []int64{0, -1, 6, math.MaxInt64} {
		runCalls(t, GCRA{}, gcraPolicy, nil, []bkCall{{bkT0, n, deny(5, 5, 0, 0), 0}})
	}
}

func TestGCRAUndecodable(t *testing.T) {
	good := gcraEncode(nil, bkT0+50)
	checkUndecodable(t, GCRA{}, gcraPolicy, [][]byte{
		{},
		{gcraVersion},
		good[:len(good)-1],
		append(clone(good), 0),
		append([]byte{lbVersion}, good[1:]...),
		gcraEncode(nil, -1),
		gcraEncode(nil, bkMaxTime+1),
		gcraEncode(nil, math.MaxInt64),
	})
}

func TestGCRAZeroAllocs(t *testing.T) { checkZeroAllocs(t, GCRA{}, gcraPolicy) }

func FuzzGCRA(f *testing.F) {
	f.Add(uint32(9), uint32(999), uint32(4), uint32(0), []byte{0, 1, 0, 0, 3, 2, 9, 0, 10, 1, 6, 3, 7, 1, 0, 1})
	f.Add(uint32(0), uint32(59_999), uint32(0), uint32(0), []byte{0, 0, 2, 0, 3, 0, 10, 0, 1, 0, 4, 0, 13, 1})
	f.Add(uint32(2999), uint32(99), uint32(1), uint32(0), []byte{12, 2, 14, 6, 2, 1, 9, 2, 11, 5, 5, 1, 8, 0, 4, 3})
	f.Add(uint32(6), uint32(0), uint32(0), uint32(0), []byte{1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11})
	f.Fuzz(func(t *testing.T, limit, windowMs, burst, maxDelay uint32, ops []byte) {
		p, ok := bkFuzzPolicy(limit, windowMs, burst, maxDelay)
		if !ok {
			return
		}
		bkFuzzRate(t, GCRA{}, p, ops, func(t *testing.T, adm []bkAdmission) {
			// Any order of calls: each admission counted at its own now.
			checkIntervalBound(t, "gcra", adm, func(i int) int64 { return adm[i].now }, p.Capacity(), 0, p.IntervalMicros())
		})
	})
}

func TestGCRALua(t *testing.T) { diffBucket(t, GCRA{}, bkRatePolicies, 6, 150) }

func TestGCRALuaServerTime(t *testing.T) { checkServerTime(t, GCRA{}, gcraPolicy) }

// The usual call, one unit on the server's clock, sends the burst and the
// interval alone (store.Script.Optional); a cost other than 1 is sent after
// them, and an injected clock after that. The twin reads each as the Go
// step does, for GCRA and for the token bucket, whose twin it is.
func TestGCRALuaOptionalArgs(t *testing.T) {
	c := newRedis(t)
	for _, alg := range []core.Algorithm{GCRA{}, TokenBucket{}} {
		s := alg.(core.Scripted).Script()
		for _, tc := range []struct{ now, n, argc int64 }{{0, 1, 2}, {0, 3, 3}, {bkT0, 1, 4}, {bkT0, 3, 4}} {
			a := core.NewScriptArgs(&gcraPolicy, tc.now, tc.n)
			if got := int64(len(s.AppendArgv(nil, &a))); got != tc.argc {
				t.Errorf("%s, now %d, n %d: %d arguments, want %d", alg.Name(), tc.now, tc.n, got, tc.argc)
			}
			key := freshKey(t, c)
			got := core.ScriptDecision(runLua(t, c, s, key, a))
			_, _, want := alg.Step(nil, bkT0, tc.n, &gcraPolicy)
			if !got.Allowed || got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter {
				t.Errorf("%s, now %d, n %d, on a fresh key: %+v, want %+v", alg.Name(), tc.now, tc.n, got, want)
			}
			// The second call, on the state the first wrote, is the Go
			// step's on the state it wrote.
			a.N = gcraPolicy.Capacity()
			got = core.ScriptDecision(runLua(t, c, s, key, a))
			next, _, _ := alg.Step(nil, bkT0, tc.n, &gcraPolicy)
			_, _, want = alg.Step(next, bkT0, a.N, &gcraPolicy)
			if tc.now != 0 && got != want {
				t.Errorf("%s, now %d: then %d units: %+v, want %+v", alg.Name(), tc.now, a.N, got, want)
			}
			if got.Allowed {
				t.Errorf("%s, now %d: %d units after %d on a fresh key were admitted", alg.Name(), tc.now, a.N, tc.n)
			}
		}
	}
}

func TestGCRALuaMemory(t *testing.T) {
	checkIntState(t, GCRA{}, core.Policy{Limit: core.MaxLimit, Window: 24 * time.Hour, Burst: 1_000_000})
}

func TestGCRALuaCluster(t *testing.T) {
	checkOnCluster(t, GCRA{}, core.Policy{Name: "c", Limit: 10, Window: 10 * time.Minute, Burst: 4}, nil)
}

func BenchmarkGCRAStep(b *testing.B) { benchStep(b, GCRA{}, gcraPolicy) }

func BenchmarkGCRAStepParallel(b *testing.B) { benchStepParallel(b, GCRA{}, gcraPolicy) }
