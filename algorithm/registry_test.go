package algorithm

import (
	"strings"
	"testing"

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
