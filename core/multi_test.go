package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

func newMulti(t *testing.T, clock core.Clock) *core.Multi {
	t.Helper()
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	m, err := core.NewMulti(core.MultiConfig{Name: "api", Store: s, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMultiMostConstraining: the Decision is the refusing limit with the
// longest wait, or for an admission the limit with the fewest left; every
// limit's state is reported, in order, and a refusal charges none.
func TestMultiMostConstraining(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC))
	m := newMulti(t, clock)
	ls := core.MustLimits(
		core.Limit{Policy: core.Policy{Name: "second", Limit: 2, Window: time.Second, Burst: 3}, Algorithm: algorithm.GCRA{}},
		core.Limit{Policy: core.PerMinute("minute", 4), Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "day", Limit: 5, Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day}},
	)
	ctx := context.Background()
	var buf [3]core.LimitState
	for i := range 3 {
		d, states, err := m.Allow(ctx, "tenant", ls, buf[:0])
		if err != nil || !d.Allowed {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
		if len(states) != 3 || states[0].Name != "second" || states[2].Name != "day" {
			t.Fatalf("states %+v", states)
		}
		if i == 2 && (d.Limit != 3 || d.Remaining != 0) {
			t.Fatalf("third call: %+v, want the burst of 3 as the most constraining (0 left)", d)
		}
	}
	d, states, err := m.Allow(ctx, "tenant", ls, buf[:0])
	if err != nil || d.Allowed {
		t.Fatalf("fourth call at the same instant: %+v %v, want refused by the burst", d, err)
	}
	if d.RetryAfter != 500*time.Millisecond || !states[1].Allowed || states[1].Remaining != 1 || states[0].Allowed {
		t.Fatalf("refusal %+v, states %+v: want Retry-After 500ms from the burst, the minute limit untouched with 1 left", d, states)
	}
	clock.Advance(time.Second)
	if d, _, _ := m.Allow(ctx, "tenant", ls, buf[:0]); !d.Allowed {
		t.Fatalf("a second later: %+v, want admitted (the refused call charged nothing)", d)
	}
	d, _, _ = m.Allow(ctx, "tenant", ls, buf[:0])
	// The minute is spent (4): the refusal waits for the minute's end,
	// the longest over what refused.
	if d.Allowed || d.RetryAfter < 28*time.Second {
		t.Fatalf("after 4 in the minute: %+v, want refused until the minute ends", d)
	}
}

// TestTiersRuntimeChange: a tenant's tier comes from the resolver per
// request; an upgrade at runtime keeps the tenant's counters; a table that
// changes a limit's algorithm or window is refused.
func TestTiersRuntimeChange(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC))
	m := newMulti(t, clock)
	day := func(n int64) core.Limit {
		return core.Limit{Policy: core.Policy{Name: "day", Limit: n, Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day}}
	}
	minute := func(n int64) core.Limit {
		return core.Limit{Policy: core.PerMinute("minute", n), Algorithm: algorithm.FixedWindow{}}
	}
	plan := map[string]string{"acme": "pro"}
	tiers, err := core.NewTiers(map[string][]core.Limit{
		"free": {minute(2), day(3)},
		"pro":  {minute(5), day(100)},
	}, "free", func(_ context.Context, id string) (string, error) { return plan[id], nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admit := func(id string) int {
		c := 0
		for range 10 {
			tier, ls, err := tiers.Resolve(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			_ = tier
			d, _, err := m.Allow(ctx, id, ls, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				c++
			}
		}
		return c
	}
	if got := admit("acme"); got != 5 {
		t.Fatalf("pro tenant: %d admitted in a minute, want 5", got)
	}
	if got := admit("nobody"); got != 2 {
		t.Fatalf("free tenant: %d admitted in a minute, want 2", got)
	}
	// Upgrade "nobody" at runtime: the minute has 2 spent of the new 5.
	plan["nobody"] = "pro"
	if got := admit("nobody"); got != 3 {
		t.Fatalf("upgraded tenant: %d more admitted, want 3 (5 less the 2 already spent: no reset)", got)
	}
	// Raise the free tier's minute at runtime.
	if err := tiers.Set(map[string][]core.Limit{"free": {minute(3), day(3)}, "pro": {minute(5), day(100)}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if got := admit("other"); got != 3 {
		t.Fatalf("free tenant after the change: %d, want 3 (the day's 3 bind with the minute's 3)", got)
	}
	bad := map[string][]core.Limit{"free": {{Policy: core.PerMinute("minute", 3), Algorithm: algorithm.GCRA{}}}}
	if err := tiers.Set(bad); !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("a table that changes the minute's algorithm: %v, want ErrInvalidPolicy", err)
	}
	if _, err := core.NewTiers(map[string][]core.Limit{"pro": {minute(5)}}, "free", nil); err == nil {
		t.Fatal("a default tier missing from the table was accepted")
	}
}

// TestMultiBadInput: bad input is an error naming it, and writes nothing.
func TestMultiBadInput(t *testing.T) {
	m := newMulti(t, nil)
	ls := core.MustLimits(core.Limit{Policy: core.PerMinute("minute", 2), Algorithm: algorithm.FixedWindow{}})
	ctx := context.Background()
	for _, tc := range []struct {
		id string
		ls *core.Limits
		n  int64
	}{{"", ls, 1}, {"x", nil, 1}, {"x", ls, 0}, {"x", ls, 3}} {
		if _, _, err := m.AllowN(ctx, tc.id, tc.ls, tc.n, nil); !errors.Is(err, core.ErrInvalidInput) {
			t.Errorf("AllowN(%q, n=%d): %v, want ErrInvalidInput", tc.id, tc.n, err)
		}
	}
	if d, _, _ := m.AllowN(ctx, "x", ls, 2, nil); !d.Allowed {
		t.Fatalf("the full quota after bad input: %+v, want admitted", d)
	}
	for _, bad := range [][]core.Limit{
		nil,
		{{Policy: core.PerMinute("a", 1)}},
		{{Policy: core.PerMinute("a", 1), Algorithm: algorithm.GCRA{}}, {Policy: core.PerMinute("a", 2), Algorithm: algorithm.GCRA{}}},
		{{Policy: core.PerMinute("a", 1), Algorithm: algorithm.Concurrency{}}},
		{{Policy: core.PerMinute("a", 0), Algorithm: algorithm.GCRA{}}},
		{{Policy: core.Policy{Name: "d", Limit: 1, Window: time.Hour}, Algorithm: algorithm.Calendar{}}},
	} {
		if _, err := core.NewLimits(bad...); !errors.Is(err, core.ErrInvalidPolicy) {
			t.Errorf("NewLimits(%v): %v, want ErrInvalidPolicy", bad, err)
		}
	}
}

// Reset deletes an identity's state under every limit, so its next request
// meets fresh quotas; another identity keeps its own.
func TestMultiReset(t *testing.T) {
	ctx := context.Background()
	m := newMulti(t, core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC)))
	ls := core.MustLimits(
		core.Limit{Policy: core.PerMinute("minute", 2), Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "day", Limit: 3, Window: 24 * time.Hour}, Algorithm: algorithm.GCRA{}},
	)
	for _, id := range []string{"tenant", "other"} {
		for range 2 {
			if d, _, err := m.Allow(ctx, id, ls, nil); err != nil || !d.Allowed {
				t.Fatalf("%s: %+v, %v; want admitted", id, d, err)
			}
		}
	}
	if err := m.Reset(ctx, "tenant", ls); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	for range 2 {
		if d, _, err := m.Allow(ctx, "tenant", ls, nil); err != nil || !d.Allowed {
			t.Fatalf("after Reset: %+v, %v; want the full quota back", d, err)
		}
	}
	if d, _, err := m.Allow(ctx, "other", ls, nil); err != nil || d.Allowed {
		t.Fatalf("another identity after the Reset: %+v, %v; want still refused", d, err)
	}

	if err := m.Reset(ctx, "", ls); !errors.Is(err, core.ErrInvalidInput) {
		t.Errorf(`Reset(""): %v; want ErrInvalidInput`, err)
	}
	if err := m.Reset(ctx, "tenant", nil); !errors.Is(err, core.ErrInvalidInput) {
		t.Errorf("Reset(nil limits): %v; want ErrInvalidInput", err)
	}
	nodel, err := core.NewMulti(core.MultiConfig{Name: "api", Store: struct{ store.Store }{memory.New(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodel.Reset(ctx, "tenant", ls); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("Reset on a store that cannot delete: %v; want ErrUnsupported", err)
	}
}

// unscripted is an algorithm with no multi-limit script (a user's own).
type unscripted struct{ core.Algorithm }

func (u unscripted) Name() string { return "unscripted" }

// TestTiersKeepOnePath: on a script store, a set of limits with one that
// has no multi-limit script is decided on the one-item path, whose keys
// differ from the script path's; a table whose tiers would take different
// paths is refused, since a tenant moved between them would not keep its
// counters. So is a Set that would change the path.
func TestTiersKeepOnePath(t *testing.T) {
	minute := core.Limit{Policy: core.PerMinute("minute", 10), Algorithm: algorithm.GCRA{}}
	custom := core.Limit{Policy: core.PerMinute("custom", 10), Algorithm: unscripted{algorithm.FixedWindow{}}}
	if _, err := core.NewTiers(map[string][]core.Limit{"free": {minute}, "pro": {minute, custom}}, "free", nil); !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("tiers on two paths: %v; want ErrInvalidPolicy", err)
	}
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {minute}, "pro": {minute}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tiers.Set(map[string][]core.Limit{"free": {minute, custom}}); !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("a Set that moves every tier to the other path: %v; want ErrInvalidPolicy", err)
	}
	if _, err := core.NewTiers(map[string][]core.Limit{"free": {custom}, "pro": {minute, custom}}, "free", nil); err != nil {
		t.Fatalf("every tier on the one-item path: %v", err)
	}
}

// TestTiersExclude: a name kept out of the tiers is refused by every later
// Set, which then changes nothing; a name a limit of the table in use has
// cannot be kept out; names add up over calls.
func TestTiersExclude(t *testing.T) {
	minute := func(name string, n int64) core.Limit {
		return core.Limit{Policy: core.PerMinute(name, n), Algorithm: algorithm.FixedWindow{}}
	}
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {minute("minute", 2)}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tiers.Exclude("minute"); !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("Exclude of a name in use: %v; want ErrInvalidPolicy", err)
	}
	if err := tiers.Exclude("per-ip"); err != nil {
		t.Fatal(err)
	}
	if err := tiers.Exclude("per-user"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"per-ip", "per-user"} {
		err := tiers.Set(map[string][]core.Limit{"free": {minute("minute", 2)}, "pro": {minute("minute", 5), minute(n, 9)}})
		if !errors.Is(err, core.ErrInvalidPolicy) || !strings.Contains(err.Error(), n) {
			t.Errorf("Set with a limit named %q: %v; want ErrInvalidPolicy naming it", n, err)
		}
	}
	if names := tiers.Names(); len(names) != 1 {
		t.Errorf("refused Sets changed the table: tiers %v", names)
	}
	if err := tiers.Set(map[string][]core.Limit{"free": {minute("minute", 3)}, "pro": {minute("minute", 5)}}); err != nil {
		t.Errorf("a Set without an excluded name: %v", err)
	}
	if err := tiers.Set(map[string][]core.Limit{"free": {minute("minute", 3)}, "pro": {minute("minute", 5), minute("per-ip", 1)}}); err == nil {
		t.Error("the exclusion did not outlive a Set")
	}
}
