package algorithm

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestSlidingLogLua(t *testing.T) {
	winLuaDiff(t, SlidingLog{}, winLuaPolicies(SlidingLogMaxLimit), 12, 150)
}

func TestSlidingLogLuaMemory(t *testing.T) {
	p := core.Policy{Name: "api", Limit: SlidingLogMaxLimit, Window: time.Hour}
	for _, k := range []int{100, SlidingLogMaxLimit} {
		steps := make([]winStep, k)
		for i := range steps {
			steps[i] = winStep{at: int64(i), n: 1} // one member per instant: the longest members
		}
		usage, floor := winLuaMemory(t, SlidingLog{}, p, steps...)
		per := (usage - floor) / int64(k)
		t.Logf("%d entries: %d bytes each", k, per)
		// Documented: about 30 bytes a member in a listpack (up to 128
		// members), about 130 in a skiplist.
		if limit := map[int]int64{100: 40, SlidingLogMaxLimit: 140}[k]; per > limit {
			t.Errorf("%d entries cost %d bytes each, want at most %d", k, per, limit)
		}
	}
}

func TestSlidingLogLuaServerTime(t *testing.T) {
	winLuaServerTime(t, SlidingLog{}, core.Policy{Name: "sl", Limit: 5, Window: time.Hour})
}

func TestSlidingLogLuaCluster(t *testing.T) {
	winLuaCluster(t, SlidingLog{}, core.Policy{Name: "sl", Limit: 10, Window: time.Hour})
}

func TestSlidingLogLuaForeignKey(t *testing.T) {
	winLuaForeignKey(t, SlidingLog{}, core.Policy{Name: "sl", Limit: 5, Window: time.Second})
}
