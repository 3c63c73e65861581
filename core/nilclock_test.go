package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A typed nil Clock (a nil *ManualClock in the interface) is refused by
// New and NewMulti, as a typed nil Store or Algorithm is: it would panic
// at the first decision.
func TestTypedNilClockRefused(t *testing.T) {
	var clk *core.ManualClock
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	if l, err := core.New(core.Config{Policy: core.PerSecond("api", 5), Algorithm: algorithm.GCRA{}, Store: s, Clock: clk}); err == nil || !strings.Contains(err.Error(), "Clock is nil") {
		if err == nil {
			_, _ = l.Allow(context.Background(), "x")
		}
		t.Errorf("core.New with a nil *ManualClock: %v, want an error saying Clock is nil", err)
	}
	if _, err := core.NewMulti(core.MultiConfig{Name: "m", Store: s, Clock: clk}); err == nil || !strings.Contains(err.Error(), "Clock is nil") {
		t.Errorf("core.NewMulti with a nil *ManualClock: %v, want an error saying Clock is nil", err)
	}
}
