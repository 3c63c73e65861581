package otel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

func newObserver(t testing.TB, opts Options) (*Observer, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	o, err := New(mp, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return o, r
}

// collected is one collection, read by instrument name and attributes.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Fatalf("scope %q; want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			c[m.Name] = m.Data
		}
	}
	return c
}

func set(kvs ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kvs...) }

// sum is the value of counter name at attributes s (0 and false when absent).
func (c collected) sum(t *testing.T, name string, s attribute.Set) (int64, bool) {
	t.Helper()
	d, ok := c[name].(metricdata.Sum[int64])
	if !ok {
		return 0, false
	}
	if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
		t.Fatalf("%s is not a cumulative monotonic sum: %+v", name, d)
	}
	for _, p := range d.DataPoints {
		if p.Attributes.Equals(&s) {
			return p.Value, true
		}
	}
	return 0, false
}

func (c collected) gauge(t *testing.T, name string, s attribute.Set) (int64, bool) {
	t.Helper()
	d, _ := c[name].(metricdata.Gauge[int64])
	for _, p := range d.DataPoints {
		if p.Attributes.Equals(&s) {
			return p.Value, true
		}
	}
	return 0, false
}

func (c collected) hist(t *testing.T, name string, s attribute.Set) (metricdata.HistogramDataPoint[float64], bool) {
	t.Helper()
	d, _ := c[name].(metricdata.Histogram[float64])
	for _, p := range d.DataPoints {
		if p.Attributes.Equals(&s) {
			return p, true
		}
	}
	return metricdata.HistogramDataPoint[float64]{}, false
}

func (c collected) want(t *testing.T, name string, s attribute.Set, want int64) {
	t.Helper()
	if got, ok := c.sum(t, name, s); !ok || got != want {
		t.Errorf("%s{%s} = %d (present %v); want %d", name, s.Encoded(attribute.DefaultEncoder()), got, ok, want)
	}
}

func requests(policy, result string) attribute.Set {
	return set(PolicyKey.String(policy), ResultKey.String(result))
}

type failing struct{ err error }

func (f failing) Update(ctx context.Context, key store.Key, m store.Mutation) error { return f.err }

// Real limiters over a memory store and a store that loses replies, read
// back through the SDK's in-memory reader.
func TestScriptedRun(t *testing.T) {
	o, r := newObserver(t, Options{})
	ctx := context.Background()
	mem := memory.New(&memory.Options{SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	mk := func(cfg core.Config) *core.Limiter {
		if cfg.Algorithm == nil {
			cfg.Algorithm = algorithm.FixedWindow{}
		}
		cfg.Observer = o.Observe
		l, err := core.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	minute := func(name string, limit int64) core.Policy {
		return core.Policy{Name: name, Limit: limit, Window: time.Minute}
	}
	api := mk(core.Config{Policy: minute("api", 10), Store: mem, Clock: clock})
	for range 12 {
		api.Allow(ctx, "alice")
	}
	dark := mk(core.Config{Policy: minute("dark", 2), Store: mem, Clock: clock, Shadow: true})
	for range 5 {
		dark.Allow(ctx, "bob")
	}
	lost := store.UnknownOutcome(errors.New("reply lost"))
	open := mk(core.Config{Policy: minute("open", 10), Store: failing{lost}, Failure: core.FailOpen})
	for range 3 {
		open.Allow(ctx, "carol")
	}
	closed := mk(core.Config{Policy: minute("closed", 10), Store: failing{lost}})
	for range 2 {
		closed.Allow(ctx, "dave")
	}

	c := collect(t, r)
	const req = "sluice.rate_limiting.requests"
	c.want(t, req, requests("api", "allowed"), 10)
	c.want(t, req, requests("api", "denied"), 2)
	c.want(t, req, requests("dark", "allowed"), 5)
	c.want(t, req, requests("open", "degraded"), 3)
	c.want(t, req, requests("closed", "error"), 2)
	c.want(t, "sluice.rate_limiting.near_limit", set(PolicyKey.String("api")), 2)
	c.want(t, "sluice.rate_limiting.near_limit", set(PolicyKey.String("dark")), 1)
	c.want(t, "sluice.rate_limiting.shadow_refusals", set(PolicyKey.String("dark")), 3)
	c.want(t, "sluice.rate_limiting.unknown_outcomes", set(PolicyKey.String("open")), 3)
	c.want(t, "sluice.rate_limiting.unknown_outcomes", set(PolicyKey.String("closed")), 2)
	if _, ok := c.sum(t, req, requests("api", "degraded")); ok {
		t.Errorf("a result that never happened has a point")
	}
	// Only network store calls are timed: 3 + 2, none for the memory store.
	for policy, want := range map[string]uint64{"open": 3, "closed": 2, "api": 0} {
		p, _ := c.hist(t, "sluice.rate_limiting.store.duration", set(PolicyKey.String(policy), OperationKey.String("allow")))
		if p.Count != want {
			t.Errorf("store.duration count for %s = %d; want %d", policy, p.Count, want)
		}
	}
}

func TestInstrumentsAndUnits(t *testing.T) {
	o, r := newObserver(t, Options{})
	o.Observe(core.Event{Policy: "p", Op: "allow", Decision: core.Decision{Allowed: true, Limit: 10, Remaining: 5, Delay: 250 * time.Millisecond}, Duration: 3 * time.Millisecond})
	o.Observe(core.Event{Policy: "p", Op: "acquire", Decision: core.Decision{Allowed: true, Limit: 10, Remaining: 5, Delay: 750 * time.Millisecond}, Duration: time.Millisecond})
	o.Observe(core.Event{Policy: "p", Op: "release", Err: store.UnknownOutcome(errors.New("x")), Duration: 2 * time.Millisecond})
	o.DenyCacheHit("p")
	o.SetFallbackActive("p", true)
	o.BreakerStateChanged("redis", "open")
	o.BreakerStateChanged("redis", "half_open")
	c := collect(t, r)

	q, ok := c.hist(t, "sluice.rate_limiting.request.time_in_queue", set(PolicyKey.String("p")))
	if !ok || q.Count != 2 || q.Sum != 1.0 {
		t.Errorf("time_in_queue: count %d sum %v; want 2 and 1.0 s", q.Count, q.Sum)
	}
	for op, want := range map[string]float64{"allow": 0.003, "acquire": 0.001, "release": 0.002} {
		p, ok := c.hist(t, "sluice.rate_limiting.store.duration", set(PolicyKey.String("p"), OperationKey.String(op)))
		if !ok || p.Count != 1 || p.Sum != want {
			t.Errorf("store.duration %s: count %d sum %v; want 1, %v", op, p.Count, p.Sum, want)
		}
	}
	c.want(t, "sluice.rate_limiting.release_errors", set(PolicyKey.String("p")), 1)
	c.want(t, "sluice.rate_limiting.unknown_outcomes", set(PolicyKey.String("p")), 1)
	c.want(t, "sluice.rate_limiting.deny_cache.hits", set(PolicyKey.String("p")), 1)
	if v, ok := c.gauge(t, "sluice.rate_limiting.fallback.active", set(PolicyKey.String("p"))); !ok || v != 1 {
		t.Errorf("fallback.active = %d, %v; want 1", v, ok)
	}
	for st, want := range map[string]int64{"open": 0, "half-open": 1, "closed": 0, Other: 0} {
		if v, ok := c.gauge(t, "sluice.rate_limiting.breaker.state", set(BreakerKey.String("redis"), BreakerStateKey.String(st))); !ok || v != want {
			t.Errorf("breaker.state %s = %d, %v; want %d", st, v, ok, want)
		}
	}
	c.want(t, "sluice.rate_limiting.breaker.transitions", set(BreakerKey.String("redis"), BreakerStateKey.String("half-open")), 1)
	c.want(t, "sluice.rate_limiting.breaker.transitions", set(BreakerKey.String("redis"), BreakerStateKey.String("open")), 1)

	// Units follow UCUM, and durations are seconds.
	var rm metricdata.ResourceMetrics
	r.Collect(context.Background(), &rm)
	units := map[string]string{
		"sluice.rate_limiting.requests":              "{request}",
		"sluice.rate_limiting.store.duration":        "s",
		"sluice.rate_limiting.request.time_in_queue": "s",
		"sluice.rate_limiting.breaker.state":         "{state}",
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if u, ok := units[m.Name]; ok && m.Unit != u {
			t.Errorf("%s unit %q; want %q", m.Name, m.Unit, u)
		}
	}
}

// The transitions counter counts changes only, as the Prometheus
// observer's does: the initial report of closed and a repeated state count
// nothing, and every state's point exists, at 0, from the first report on.
func TestBreakerTransitionsCountChangesOnly(t *testing.T) {
	o, r := newObserver(t, Options{})
	o.BreakerStateChanged("redis", "closed")
	trans := func(breaker, st string) attribute.Set {
		return set(BreakerKey.String(breaker), BreakerStateKey.String(st))
	}
	c := collect(t, r)
	for _, st := range BreakerStates {
		c.want(t, "sluice.rate_limiting.breaker.transitions", trans("redis", st), 0)
	}
	for _, s := range []string{"open", "open", "half-open", "open", "half-open", "half_open", "closed", "closed"} {
		o.BreakerStateChanged("redis", s)
	}
	o.BreakerStateChanged("db", "open") // no initial report: a breaker starts closed
	c = collect(t, r)
	for st, want := range map[string]int64{"closed": 1, "open": 2, "half-open": 2, Other: 0} {
		c.want(t, "sluice.rate_limiting.breaker.transitions", trans("redis", st), want)
	}
	c.want(t, "sluice.rate_limiting.breaker.transitions", trans("db", "open"), 1)

	// Past MaxPolicies, breakers count as Other, each one's changes still
	// told apart: three initial reports and three openings are 3 changes.
	o, r = newObserver(t, Options{MaxPolicies: 2})
	for i := range 5 {
		o.BreakerStateChanged(fmt.Sprintf("b%d", i), "closed")
		o.BreakerStateChanged(fmt.Sprintf("b%d", i), "open")
	}
	c = collect(t, r)
	c.want(t, "sluice.rate_limiting.breaker.transitions", trans(Other, "open"), 3)
	c.want(t, "sluice.rate_limiting.breaker.transitions", trans(Other, "closed"), 0)
}

func TestCardinalityBound(t *testing.T) {
	o, r := newObserver(t, Options{MaxPolicies: 2})
	for i := range 5 {
		o.Observe(core.Event{Policy: fmt.Sprintf("p%d", i), Op: "allow", Decision: core.Decision{Allowed: true, Limit: 10, Remaining: 9}})
	}
	c := collect(t, r)
	c.want(t, "sluice.rate_limiting.requests", requests("p0", "allowed"), 1)
	c.want(t, "sluice.rate_limiting.requests", requests("p1", "allowed"), 1)
	c.want(t, "sluice.rate_limiting.requests", requests(Other, "allowed"), 3)
	if n := len(c["sluice.rate_limiting.requests"].(metricdata.Sum[int64]).DataPoints); n != 3 {
		t.Errorf("%d points; want 3", n)
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, ratio := range []float64{-1, 1.5} {
		if _, err := New(sdkmetric.NewMeterProvider(), Options{NearLimitRatio: ratio}); err == nil {
			t.Errorf("NearLimitRatio %v accepted", ratio)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil): no error")
	}
	var typed *sdkmetric.MeterProvider // an interface holding a nil pointer
	if _, err := New(typed, Options{}); err == nil {
		t.Error("New((*MeterProvider)(nil)): no error")
	}
}

// Two sources reporting one breaker at once (two breakers left at one
// name) must leave the gauge and the remembered state in agreement: the
// gauge is one-hot, and reporting the state it shows counts no change.
func TestBreakerConcurrentReports(t *testing.T) {
	o, r := newObserver(t, Options{})
	at := func(st string) attribute.Set { return set(BreakerKey.String("b"), BreakerStateKey.String(st)) }
	for round := range 500 {
		o.BreakerStateChanged("b", "closed")
		done := make(chan struct{})
		go func() { o.BreakerStateChanged("b", "open"); close(done) }()
		o.BreakerStateChanged("b", "half-open")
		<-done
		c := collect(t, r)
		shown := ""
		for _, st := range BreakerStates {
			if v, _ := c.gauge(t, "sluice.rate_limiting.breaker.state", at(st)); v == 1 {
				if shown != "" {
					t.Fatalf("round %d: the gauge is 1 for %s and %s", round, shown, st)
				}
				shown = st
			}
		}
		before, _ := c.sum(t, "sluice.rate_limiting.breaker.transitions", at(shown))
		o.BreakerStateChanged("b", shown)
		after, _ := collect(t, r).sum(t, "sluice.rate_limiting.breaker.transitions", at(shown))
		if after != before {
			t.Fatalf("round %d: the gauge shows %s, yet reporting %s counted a change", round, shown, shown)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	o, _ := newObserver(b, Options{})
	e := core.Event{Policy: "bench", Op: "allow", Decision: core.Decision{Allowed: true, Limit: 100, Remaining: 50}}
	b.ReportAllocs()
	for b.Loop() {
		o.Observe(e)
	}
}

// Attribute values are valid UTF-8, as OTLP's protobuf strings must be (an
// exporter fails the whole batch on one that is not): a breaker's name and
// the names given to the hooks are the application's, unchecked.
func TestAttributeValuesAreUTF8(t *testing.T) {
	o, r := newObserver(t, Options{})
	o.BreakerStateChanged("store\xff", "open")
	o.DenyCacheHit("cache\xfe")
	o.SetFallbackActive("fallback\xc3", true)
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := 0
	check := func(s attribute.Set) {
		for _, kv := range s.ToSlice() {
			seen++
			if v := kv.Value.AsString(); kv.Value.Type() == attribute.STRING && !utf8.ValidString(v) {
				t.Errorf("attribute %s=%q is not UTF-8", kv.Key, v)
			}
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					check(p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					check(p.Attributes)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no attributes collected")
	}
}
