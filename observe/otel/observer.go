package otel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// ScopeName is the instrumentation scope of the Meter.
const ScopeName = "github.com/sluicehq/sluice/observe/otel"

// Attribute keys.
const (
	PolicyKey       = attribute.Key("sluice.rate_limiting.policy")
	ResultKey       = attribute.Key("sluice.rate_limiting.result")
	OperationKey    = attribute.Key("sluice.rate_limiting.operation")
	BreakerKey      = attribute.Key("sluice.rate_limiting.breaker")
	BreakerStateKey = attribute.Key("sluice.rate_limiting.breaker.state")
)

// Other is the value that stands for the policies (and breakers) past
// Options.MaxPolicies, and for breaker states that are none of the known
// ones.
const Other = "other"

// DefaultMaxPolicies is Options.MaxPolicies when it is zero.
const DefaultMaxPolicies = 1000

// DefaultNearLimitRatio is Options.NearLimitRatio when it is zero.
const DefaultNearLimitRatio = 0.8

// DurationBuckets are the explicit bucket bounds, in seconds, of the
// duration histograms: from half a millisecond to the default 100 ms store
// deadline and beyond (the SDK's defaults are for milliseconds).
var DurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Options configures an Observer. The zero value means the defaults.
type Options struct {
	// NearLimitRatio: an admission is near its limit when the units used
	// after it exceed floor(Limit × NearLimitRatio), as envoy ratelimit
	// counts near_limit. Default DefaultNearLimitRatio; in (0, 1].
	NearLimitRatio float64
	// MaxPolicies bounds the policy names (and, apart, breaker names) that
	// get attributes of their own; the rest are Other. Default
	// DefaultMaxPolicies.
	MaxPolicies int
}

// Observer records what Limiters decide as OpenTelemetry metrics. Its
// Observe method is a core.Config.Observer; share one between the Limiters
// of a process. It is safe for concurrent use.
type Observer struct {
	ratio       float64
	maxPolicies int

	requests, nearLimit, shadow, unknown, releaseErrs, denyHits metric.Int64Counter
	queue, store                                                metric.Float64Histogram
	fallback, breakerState                                      metric.Int64Gauge
	breakerTrans                                                metric.Int64Counter

	mu       sync.Mutex
	policies atomic.Pointer[map[string]*attrs] // copy-on-write
	breakers map[string]string                 // names with attributes of their own → the state last reported
	others   map[string]string                 // names counted as Other → the state last reported (at most MaxPolicies)
}

// attrs are one policy's pre-built options, so that recording allocates
// nothing.
type attrs struct {
	allowed, denied, degraded, errored []metric.AddOption
	policy                             []metric.AddOption
	allow, acquire, release            []metric.RecordOption
	queue                              []metric.RecordOption
	gauge                              []metric.RecordOption
}

// New returns an Observer whose instruments come from mp's Meter
// ScopeName. It returns an error for a nil mp (a nil pointer in the interface too), for a NearLimitRatio outside
// (0, 1] and when an instrument cannot be created.
func New(mp metric.MeterProvider, opts Options) (*Observer, error) {
	if store.IsNil(mp) {
		return nil, errors.New("sluice/observe/otel: the MeterProvider is nil (otel.GetMeterProvider(), or an SDK's)")
	}
	if opts.NearLimitRatio == 0 {
		opts.NearLimitRatio = DefaultNearLimitRatio
	}
	if !(opts.NearLimitRatio > 0 && opts.NearLimitRatio <= 1) {
		return nil, fmt.Errorf("sluice/observe/otel: NearLimitRatio must lie in (0, 1], got %v", opts.NearLimitRatio)
	}
	if opts.MaxPolicies <= 0 {
		opts.MaxPolicies = DefaultMaxPolicies
	}
	m := mp.Meter(ScopeName)
	o := &Observer{ratio: opts.NearLimitRatio, maxPolicies: opts.MaxPolicies, breakers: map[string]string{}, others: map[string]string{}}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(DurationBuckets...))
		errs = append(errs, err)
		return h
	}
	gauge := func(name, unit, desc string) metric.Int64Gauge {
		g, err := m.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	o.requests = counter("sluice.rate_limiting.requests", "{request}", "Rate-limit decisions, by policy and result.")
	o.nearLimit = counter("sluice.rate_limiting.near_limit", "{request}", "Admissions that left the identity past the near-limit ratio of its limit.")
	o.shadow = counter("sluice.rate_limiting.shadow_refusals", "{request}", "Refusals that a shadow-mode limiter admitted.")
	o.unknown = counter("sluice.rate_limiting.unknown_outcomes", "{call}", "Store calls whose outcome is unknown.")
	o.releaseErrs = counter("sluice.rate_limiting.release_errors", "{call}", "Lease releases that failed.")
	o.denyHits = counter("sluice.rate_limiting.deny_cache.hits", "{request}", "Refusals answered by the deny cache without a store call.")
	o.breakerTrans = counter("sluice.rate_limiting.breaker.transitions", "{transition}", "Circuit breaker state changes, by the state entered (closed: recoveries).")
	o.queue = hist("sluice.rate_limiting.request.time_in_queue", "How long an admission waits before it starts (leaky bucket delay).")
	o.store = hist("sluice.rate_limiting.store.duration", "Duration of the store call behind a decision or release, failure policy included.")
	o.fallback = gauge("sluice.rate_limiting.fallback.active", "{state}", "1 while the policy decides through its fallback.")
	o.breakerState = gauge("sluice.rate_limiting.breaker.state", "{state}", "1 for the circuit breaker's current state, 0 for the others.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sluice/observe/otel: %w", err)
	}
	empty := map[string]*attrs{}
	o.policies.Store(&empty)
	return o, nil
}

// Observe records one event. It is a core.Config.Observer.
func (o *Observer) Observe(e core.Event) {
	ctx := context.Background()
	a := o.attrs(e.Policy)
	if e.Op == "release" {
		if e.Duration > 0 {
			o.store.Record(ctx, e.Duration.Seconds(), a.release...)
		}
		if e.Err != nil {
			o.releaseErrs.Add(ctx, 1, a.policy...)
			if errors.Is(e.Err, core.ErrOutcomeUnknown) {
				o.unknown.Add(ctx, 1, a.policy...)
			}
		}
		return
	}
	d := &e.Decision
	switch {
	case d.Degraded:
		o.requests.Add(ctx, 1, a.degraded...)
	case e.Err != nil:
		o.requests.Add(ctx, 1, a.errored...)
	case d.Allowed:
		o.requests.Add(ctx, 1, a.allowed...)
		if e.NearLimit(o.ratio) {
			o.nearLimit.Add(ctx, 1, a.policy...)
		}
		if d.Delay > 0 {
			o.queue.Record(ctx, d.Delay.Seconds(), a.queue...)
		}
	default:
		o.requests.Add(ctx, 1, a.denied...)
	}
	if e.Shadowed {
		o.shadow.Add(ctx, 1, a.policy...)
	}
	if e.DenyCached {
		o.denyHits.Add(ctx, 1, a.policy...)
	}
	if e.Err != nil && errors.Is(e.Err, core.ErrOutcomeUnknown) {
		o.unknown.Add(ctx, 1, a.policy...)
	}
	if e.Duration > 0 {
		if e.Op == "acquire" {
			o.store.Record(ctx, e.Duration.Seconds(), a.acquire...)
		} else {
			o.store.Record(ctx, e.Duration.Seconds(), a.allow...)
		}
	}
}

func (o *Observer) attrs(policy string) *attrs {
	if a, ok := (*o.policies.Load())[policy]; ok {
		return a
	}
	return o.resolve(policy)
}

func (o *Observer) resolve(policy string) *attrs {
	// An attribute's value must be UTF-8 (OTLP's strings are, and an
	// exporter fails a whole batch on one that is not): a Limiter's policy
	// names are checked, a hook's are the application's.
	policy = strings.ToValidUTF8(policy, "\uFFFD")
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.policies.Load()
	if a, ok := old[policy]; ok {
		return a
	}
	if len(old) >= o.maxPolicies && policy != Other {
		if a, ok := old[Other]; ok {
			return a
		}
		policy = Other
	}
	p := PolicyKey.String(policy)
	add := func(kvs ...attribute.KeyValue) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, p)...))}
	}
	rec := func(kvs ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, p)...))}
	}
	a := &attrs{
		allowed:  add(ResultKey.String("allowed")),
		denied:   add(ResultKey.String("denied")),
		degraded: add(ResultKey.String("degraded")),
		errored:  add(ResultKey.String("error")),
		policy:   add(),
		allow:    rec(OperationKey.String("allow")),
		acquire:  rec(OperationKey.String("acquire")),
		release:  rec(OperationKey.String("release")),
		queue:    rec(),
		gauge:    rec(),
	}
	next := make(map[string]*attrs, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[policy] = a
	o.policies.Store(&next)
	return a
}

// DenyCacheHit counts one refusal of policy answered by a deny cache
// without a store call. Observe counts those of core's deny cache itself
// (Event.DenyCached); DenyCacheHit is for a cache of your own.
func (o *Observer) DenyCacheHit(policy string) {
	o.denyHits.Add(context.Background(), 1, o.attrs(policy).policy...)
}

// SetFallbackActive records whether policy decides through its fallback
// now (sluice.rate_limiting.fallback.active 1 or 0). Wire it to whatever
// enters and leaves the fallback.
func (o *Observer) SetFallbackActive(policy string, active bool) {
	var v int64
	if active {
		v = 1
	}
	o.fallback.Record(context.Background(), v, o.attrs(policy).gauge...)
}

// BreakerStates are the values of the breaker state attribute.
var BreakerStates = []string{"closed", "open", "half-open", Other}

// BreakerStateChanged records that the circuit breaker name entered state
// ("closed", "open", "half-open"; "half_open" and "halfopen" read as
// "half-open", anything else as Other): the state gauge is 1 for it and 0
// for the others, and, when state is not the one last reported for name,
// one transition into it is counted. Before its first report a breaker is
// taken to be closed, as every breaker starts: the initial report of
// closed, like a repeated state, counts no transition. Wire it to the
// breaker's OnStateChange callback, and call it once with the initial
// state (which also creates every state's transition point, at 0).
func (o *Observer) BreakerStateChanged(name, state string) {
	switch state {
	case "closed", "open", "half-open":
	case "half_open", "halfopen":
		state = "half-open"
	default:
		state = Other
	}
	// An attribute's value must be UTF-8, and a breaker's name is the
	// application's, unchecked.
	name = strings.ToValidUTF8(name, "\uFFFD")
	ctx := context.Background()
	// The points are recorded under the lock too: two reports of one name
	// at once (two breakers left at one name) would otherwise leave the
	// gauge on one state and the memory of the last on the other.
	o.mu.Lock()
	defer o.mu.Unlock()
	last, seen := o.breakers[name]
	fresh := false
	switch {
	case seen:
		o.breakers[name] = state
	case len(o.breakers) < o.maxPolicies:
		o.breakers[name] = state
		last, fresh = "closed", true
	default:
		// Past the bound: counted as Other, each name's changes told
		// apart as long as it is remembered.
		if _, ok := o.breakers[Other]; !ok {
			o.breakers[Other] = "closed"
			fresh = true
		}
		if last, seen = o.others[name]; !seen {
			last = "closed"
			if len(o.others) >= o.maxPolicies {
				clear(o.others)
			}
		}
		o.others[name] = state
		name = Other
	}
	b := BreakerKey.String(name)
	for _, st := range BreakerStates {
		var v int64
		if st == state {
			v = 1
		}
		o.breakerState.Record(ctx, v, metric.WithAttributes(b, BreakerStateKey.String(st)))
		if fresh {
			o.breakerTrans.Add(ctx, 0, metric.WithAttributes(b, BreakerStateKey.String(st)))
		}
	}
	if state != last {
		o.breakerTrans.Add(ctx, 1, metric.WithAttributes(b, BreakerStateKey.String(state)))
	}
}
