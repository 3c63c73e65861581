package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A Store that New did not make (a zero Store) answers every call with an
// error, as the zero network stores do, instead of panicking.
func TestZeroStoreIsAnError(t *testing.T) {
	var s memory.Store
	l, err := core.New(core.Config{Policy: core.PerSecond("p", 5), Algorithm: algorithm.GCRA{}, Store: &s})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Allow(context.Background(), "who"); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Allow: %v; want an error matching ErrUnavailable", err)
	}
	if err := l.Reset(context.Background(), "who"); err == nil {
		t.Error("Reset succeeded on a zero Store")
	}
	m, err := core.NewMulti(core.MultiConfig{Name: "m", Store: &s})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Allow(context.Background(), "who", core.MustLimits(core.Limit{Policy: core.PerSecond("q", 5), Algorithm: algorithm.GCRA{}}), nil); err == nil {
		t.Error("Multi.Allow succeeded on a zero Store")
	}
	_ = s.Len()
	_ = s.Sweep()
	_ = s.Close()
}
