package nethttp

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// testLimiter is a sliding-log limiter over a fresh memory store: no window
// boundary that a test could straddle.
func testLimiter(t testing.TB, name string, limit int64, window time.Duration) *core.Limiter {
	t.Helper()
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{
		Policy:    core.Policy{Name: name, Limit: limit, Window: window},
		Algorithm: algorithm.SlidingLog{},
		Store:     s,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testPolicy(t testing.TB, cfg Config) *Policy {
	t.Helper()
	if len(cfg.Layers) == 0 {
		cfg.Layers = []Layer{{Limiter: testLimiter(t, "test", 10, time.Minute)}}
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
