package prometheus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

func allow(policy string, limit, remaining int64) core.Event {
	return core.Event{Policy: policy, Op: "allow", Decision: core.Decision{Allowed: true, Limit: limit, Remaining: remaining}}
}

// Near the limit is envoy's rule: units used after the admission above
// floor(Limit × ratio).
func TestNearLimitThreshold(t *testing.T) {
	tests := []struct {
		ratio            float64
		limit, remaining int64
		near             bool
	}{
		{0.8, 10, 2, false}, // used 8, threshold 8
		{0.8, 10, 1, true},  // used 9
		{0.8, 10, 0, true},
		{0.8, 3, 1, false}, // used 2, threshold floor(2.4) = 2
		{0.8, 3, 0, true},
		{0.5, 100, 50, false},
		{0.5, 100, 49, true},
		{1, 10, 0, false}, // ratio 1: nothing is near, only past
		{0.8, 0, 0, false},
	}
	for _, tt := range tests {
		o, _ := newObserver(t, Options{NearLimitRatio: tt.ratio})
		o.Observe(allow("p", tt.limit, tt.remaining))
		got := testutil.ToFloat64(o.nearLimit.WithLabelValues("p"))
		if want := map[bool]float64{false: 0, true: 1}[tt.near]; got != want {
			t.Errorf("ratio %v, limit %d, remaining %d: near_limit %v; want %v", tt.ratio, tt.limit, tt.remaining, got, want)
		}
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, r := range []float64{-0.1, 1.01, 2} {
		if _, err := New(prometheus.NewRegistry(), Options{NearLimitRatio: r}); err == nil || !strings.Contains(err.Error(), "NearLimitRatio") {
			t.Errorf("NearLimitRatio %v: err = %v; want an error that names it", r, err)
		}
	}
	for _, b := range [][]float64{{1, 0.5}, {1, 1}} {
		if _, err := New(prometheus.NewRegistry(), Options{Buckets: b}); err == nil || !strings.Contains(err.Error(), "Buckets") {
			t.Errorf("Buckets %v: err = %v; want an error that names them (client_golang would panic at the first observation)", b, err)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	var are prometheus.AlreadyRegisteredError
	if _, err := New(reg, Options{}); !errors.As(err, &are) {
		t.Fatalf("a second Observer on one registry: %v; want AlreadyRegisteredError", err)
	}
	if _, err := New(reg, Options{Namespace: "edge"}); err != nil {
		t.Fatalf("a second namespace: %v", err)
	}
}

// A New that fails registers nothing, so that a New on the same registry
// succeeds once the cause is gone; a constant label that is also one of the
// metrics' own labels is refused before anything is registered; a nil
// registry is an error, not a panic.
func TestFailedNewRegistersNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Someone else's metric with the name and labels of the last of ours.
	other := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Name: "breaker_transitions_total",
		Help: "Circuit breaker state changes, by the state entered (state=\"closed\": recoveries)."}, []string{"breaker", "state"})
	reg.MustRegister(other)
	var are prometheus.AlreadyRegisteredError
	if _, err := New(reg, Options{}); !errors.As(err, &are) {
		t.Fatalf("New with one of its metrics taken: %v, want AlreadyRegisteredError", err)
	}
	reg.Unregister(other)
	if _, err := New(reg, Options{}); err != nil {
		t.Errorf("New once the metric is free again: %v (the failed New left its others registered)", err)
	}
	if _, err := New(prometheus.NewRegistry(), Options{ConstLabels: prometheus.Labels{"state": "x"}}); err == nil || !strings.Contains(err.Error(), `"state"`) {
		t.Errorf("a constant label named as a metric's own label: %v, want an error naming it", err)
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil): no error")
	}
	if _, err := New((*prometheus.Registry)(nil), Options{}); err == nil {
		t.Error("New of a nil *Registry: no error")
	}
}

// Past MaxPolicies names, policies count under "other": the series stay
// bounded whatever names arrive.
func TestPolicyCardinalityBound(t *testing.T) {
	o, reg := newObserver(t, Options{MaxPolicies: 3})
	for i := range 10 {
		o.Observe(allow(fmt.Sprintf("p%d", i), 10, 9))
	}
	o.Observe(allow("p1", 10, 9)) // still its own
	for _, c := range []struct {
		policy string
		want   float64
	}{{"p0", 1}, {"p1", 2}, {"p2", 1}, {Other, 7}} {
		if got := testutil.ToFloat64(o.decisions.WithLabelValues(c.policy, "allowed")); got != c.want {
			t.Errorf("%s allowed = %v; want %v", c.policy, got, c.want)
		}
	}
	n, err := testutil.GatherAndCount(reg, "sluice_decisions_total")
	if err != nil || n != 4*len(Outcomes) {
		t.Fatalf("%d decision series, %v; want %d (3 policies and other, 4 outcomes each)", n, err, 4*len(Outcomes))
	}
	for i := range 5 {
		o.BreakerStateChanged(fmt.Sprintf("b%d", i), "open")
	}
	if got := testutil.ToFloat64(o.breakerTrans.WithLabelValues(Other, "open")); got != 2 {
		t.Fatalf("breakers past the bound: %v transitions under other; want 2", got)
	}
}

func TestOutcomes(t *testing.T) {
	o, _ := newObserver(t, Options{})
	lost := store.UnknownOutcome(errors.New("lost"))
	down := &store.Error{Op: "update", Err: errors.New("down")}
	for _, e := range []core.Event{
		allow("p", 10, 9),
		{Policy: "p", Op: "allow", Decision: core.Decision{Limit: 10}},
		{Policy: "p", Op: "acquire", Decision: core.Decision{Limit: 10}, Duration: time.Millisecond},
		{Policy: "p", Op: "allow", Decision: core.Decision{Allowed: true, Degraded: true, Limit: 10}, Err: down},
		{Policy: "p", Op: "allow", Decision: core.Decision{Degraded: true, Limit: 10}, Err: lost},
		{Policy: "p", Op: "allow", Decision: core.Decision{Allowed: true, Degraded: true}, Err: down, Shadowed: true},
		{Policy: "p", Op: "allow", Err: lost, Duration: 2 * time.Millisecond},
		{Policy: "p", Op: "release", Err: lost, Duration: time.Millisecond},
		{Policy: "p", Op: "release"},
	} {
		o.Observe(e)
	}
	for name, c := range map[string]struct {
		c    prometheus.Collector
		want float64
	}{
		"allowed":  {o.decisions.WithLabelValues("p", "allowed"), 1},
		"denied":   {o.decisions.WithLabelValues("p", "denied"), 2},
		"degraded": {o.decisions.WithLabelValues("p", "degraded"), 3},
		"error":    {o.decisions.WithLabelValues("p", "error"), 1},
		"unknown":  {o.unknown.WithLabelValues("p"), 3},
		"shadow":   {o.shadow.WithLabelValues("p"), 1},
		"release":  {o.releaseErrs.WithLabelValues("p"), 1},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v; want %v", name, got, c.want)
		}
	}
	// 2 timed decisions (acquire, allow) and 1 timed release; untimed
	// events are not observed.
	if n := testutil.CollectAndCount(o.latency); n != 3 {
		t.Errorf("%d histogram series; want 3 (allow, acquire, release)", n)
	}
}

func TestBreakerStates(t *testing.T) {
	o, _ := newObserver(t, Options{})
	for _, s := range []string{"closed", "open", "half_open", "closed", "melted"} {
		o.BreakerStateChanged("redis", s)
	}
	for st, want := range map[string]float64{"closed": 0, "open": 0, "half-open": 0, Other: 1} {
		if got := testutil.ToFloat64(o.breakerState.WithLabelValues("redis", st)); got != want {
			t.Errorf("state %s = %v; want %v", st, got, want)
		}
	}
	// The first report (closed, where every breaker starts) is not a
	// change; the second closed is.
	for st, want := range map[string]float64{"closed": 1, "open": 1, "half-open": 1, Other: 1} {
		if got := testutil.ToFloat64(o.breakerTrans.WithLabelValues("redis", st)); got != want {
			t.Errorf("transitions into %s = %v; want %v", st, got, want)
		}
	}
	// A breaker's name is the application's: one that is not UTF-8 is
	// counted under its valid form, not a panic in client_golang.
	o.BreakerStateChanged("db\xff", "open")
	if got := testutil.ToFloat64(o.breakerState.WithLabelValues("db\uFFFD", "open")); got != 1 {
		t.Errorf("a breaker named %q: open = %v; want 1", "db\xff", got)
	}
	o.SetFallbackActive("p", true)
	o.SetFallbackActive("p", false)
	if got := testutil.ToFloat64(o.fallback.WithLabelValues("p")); got != 0 {
		t.Errorf("fallback after leaving = %v", got)
	}
	// So are the policy names given to the hooks (a Limiter's are checked).
	o.SetFallbackActive("p\xff\xfe", true)
	o.DenyCacheHit("p\xff")
	if got := testutil.ToFloat64(o.fallback.WithLabelValues("p\uFFFD")); got != 1 {
		t.Errorf("a fallback of a policy named %q = %v; want 1", "p\xff\xfe", got)
	}
	if got := testutil.ToFloat64(o.denyHits.WithLabelValues("p\uFFFD")); got != 1 {
		t.Errorf("deny-cache hits of a policy named %q = %v; want 1", "p\xff", got)
	}
}

// sluice_breaker_transitions_total counts changes only: the first report
// of closed (the initial state every breaker starts in, which the docs ask
// to report so that the series exist) and a repeated state count nothing.
// Every state's counter exists from the first report on, at 0, so that
// increase() sees the first change into it (a counter that first appears
// at 1 loses that step).
func TestBreakerTransitionsCountChangesOnly(t *testing.T) {
	o, _ := newObserver(t, Options{})
	o.BreakerStateChanged("redis", "closed")
	if n := testutil.CollectAndCount(o.breakerTrans); n != len(BreakerStates) {
		t.Fatalf("%d transition series after the initial report; want %d, one per state", n, len(BreakerStates))
	}
	for _, st := range BreakerStates {
		if got := testutil.ToFloat64(o.breakerTrans.WithLabelValues("redis", st)); got != 0 {
			t.Errorf("after the initial report, transitions into %s = %v; want 0", st, got)
		}
	}
	for _, s := range []string{"open", "open", "half-open", "open", "half-open", "half_open", "closed", "closed"} {
		o.BreakerStateChanged("redis", s)
	}
	for st, want := range map[string]float64{"closed": 1, "open": 2, "half-open": 2, Other: 0} {
		if got := testutil.ToFloat64(o.breakerTrans.WithLabelValues("redis", st)); got != want {
			t.Errorf("transitions into %s = %v; want %v", st, got, want)
		}
	}
	// Without the initial report, the first change still counts: a
	// breaker starts closed.
	o.BreakerStateChanged("db", "open")
	if got := testutil.ToFloat64(o.breakerTrans.WithLabelValues("db", "open")); got != 1 {
		t.Errorf("a first report of open counted %v; want 1", got)
	}

	// Past MaxPolicies, breakers count under Other, each one's changes
	// still told apart: three initial reports and three openings are 3
	// changes.
	o, _ = newObserver(t, Options{MaxPolicies: 2})
	for i := range 5 {
		o.BreakerStateChanged(fmt.Sprintf("b%d", i), "closed")
		o.BreakerStateChanged(fmt.Sprintf("b%d", i), "open")
	}
	for st, want := range map[string]float64{"open": 3, "closed": 0} {
		if got := testutil.ToFloat64(o.breakerTrans.WithLabelValues(Other, st)); got != want {
			t.Errorf("past the bound, transitions into %s under other = %v; want %v", st, got, want)
		}
	}
}

func TestStoreCollectorRejectsAStoreThatReportsNothing(t *testing.T) {
	if _, err := NewStoreCollector("", "x", failing{}); err == nil {
		t.Fatal("a store that reports nothing was accepted")
	}
}

// A Multi's admission is near its limit when any of its limits is, not
// only the most constraining one (the one with the fewest units left): a
// tenant past 80% of its daily quota, with its per-second limit far from
// spent, is near.
func TestNearLimitOfAMulti(t *testing.T) {
	o, _ := newObserver(t, Options{})
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ls, err := core.NewLimits(
		core.Limit{Policy: core.Policy{Name: "second", Limit: 10, Window: time.Second}, Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "day", Limit: 1000, Window: 24 * time.Hour}, Algorithm: algorithm.FixedWindow{}},
	)
	if err != nil {
		t.Fatal(err)
	}
	m, err := core.NewMulti(core.MultiConfig{Name: "tier", Store: memory.New(nil), Clock: clock, Observer: o.Observe})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 801 {
		if d, _, err := m.AllowN(context.Background(), "tenant", ls, 1, nil); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		clock.Advance(time.Second)
	}
	if got := testutil.ToFloat64(o.nearLimit.WithLabelValues("tier")); got != 1 {
		t.Errorf("near_limit after 801 of a daily 1000 (one a second): %v; want 1 (the 801st)", got)
	}
}
