package algorithm

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range All() {
		if seen[a.Name()] {
			t.Errorf("two algorithms are named %q", a.Name())
		}
		seen[a.Name()] = true
		got, err := ByName(a.Name())
		if err != nil || got.Name() != a.Name() {
			t.Errorf("ByName(%q) = %v, %v", a.Name(), got, err)
		}
		s, ok := a.(core.Scripted)
		if !ok {
			t.Errorf("%s has no Lua twin", a.Name())
			continue
		}
		if sc := s.Script(); sc == nil || sc.Name != a.Name() || !strings.Contains(sc.Source, "KEYS[1]") || len(sc.Hash) != 40 {
			t.Errorf("%s: script %+v is not its embedded twin", a.Name(), sc)
		}
	}
	if len(seen) != 7 {
		t.Errorf("All() has %d algorithms, want 7", len(seen))
	}
	if _, err := ByName("leaky"); err == nil || !strings.Contains(err.Error(), "leaky-bucket") {
		t.Errorf("ByName of an unknown name: %v; want an error listing the known names", err)
	}
	var c core.Algorithm = Concurrency{}
	if _, ok := c.(core.Leaser); !ok {
		t.Errorf("Concurrency is not a Leaser")
	}
}

// A new key's state is built in one allocation; an existing key's in none.
func TestStepAllocations(t *testing.T) {
	p := core.Policy{Name: "p", Limit: 1000, Window: time.Second}
	for _, alg := range []core.Algorithm{FixedWindow{}, SlidingCounter{}, TokenBucket{}, GCRA{}, LeakyBucket{}} {
		var now int64 = 1_900_000_000_000_000
		if n := testing.AllocsPerRun(100, func() { alg.Step(nil, now, 1, &p) }); n != 1 {
			t.Errorf("%s: a new key's state: %v allocations, want 1", alg.Name(), n)
		}
		state, _, _ := alg.Step(nil, now, 1, &p)
		if n := testing.AllocsPerRun(100, func() {
			now++
			if next, _, _ := alg.Step(state, now, 1, &p); next != nil {
				state = next
			}
		}); n != 0 {
			t.Errorf("%s: an existing key: %v allocations, want 0", alg.Name(), n)
		}
	}
}
