package prometheus

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// DefaultMaxPolicies is Options.MaxPolicies when it is zero.
const DefaultMaxPolicies = 1000

// DefaultNearLimitRatio is Options.NearLimitRatio when it is zero: envoy
// ratelimit's near_limit threshold.
const DefaultNearLimitRatio = 0.8

// Other is the label value that counts the policies (and breakers) past
// Options.MaxPolicies, and breaker states that are none of the known ones.
const Other = "other"

// DefaultBuckets are the classic buckets of the store call histogram, in
// seconds: from half a millisecond (a loopback Redis) to the default
// 100 ms deadline and beyond.
var DefaultBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// Options configures an Observer. The zero value means the defaults.
type Options struct {
	// Namespace starts every metric name. Default "sluice".
	Namespace string
	// ConstLabels are added to every series (for example the service).
	ConstLabels prometheus.Labels
	// NearLimitRatio: an admission is near its limit when the units used
	// after it exceed floor(Limit × NearLimitRatio), as envoy ratelimit
	// counts near_limit. Default DefaultNearLimitRatio; it must lie in
	// (0, 1].
	NearLimitRatio float64
	// MaxPolicies bounds the distinct policy names (and, apart, breaker
	// names) that get series of their own; the rest count under Other.
	// Default DefaultMaxPolicies.
	MaxPolicies int
	// Buckets are the classic buckets of the store call histogram, in
	// seconds. Default DefaultBuckets. The histogram is also a native
	// histogram (bucket factor 1.1), which a Prometheus that scrapes
	// protobuf stores instead.
	Buckets []float64
}

// Observer counts what Limiters decide. Its Observe method is a
// core.Config.Observer; share one Observer between every Limiter of a
// process. It is safe for concurrent use.
type Observer struct {
	ratio       float64
	maxPolicies int

	decisions, nearLimit, shadow, unknown, releaseErrs, denyHits *prometheus.CounterVec
	latency                                                      *prometheus.HistogramVec
	fallback                                                     *prometheus.GaugeVec
	breakerState                                                 *prometheus.GaugeVec
	breakerTrans                                                 *prometheus.CounterVec

	mu       sync.Mutex                         // serializes writers of policies and breakers
	policies atomic.Pointer[map[string]*series] // copy-on-write
	breakers map[string]string                  // names with series of their own → the state last reported
	others   map[string]string                  // names counted under Other → the state last reported (at most MaxPolicies)
}

// series are one policy's children, resolved once.
type series struct {
	allowed, denied, degraded, errored prometheus.Counter
	nearLimit, shadow, unknown         prometheus.Counter
	releaseErrs, denyHits              prometheus.Counter
	allow, acquire, release            prometheus.Observer
	fallback                           prometheus.Gauge
}

// Outcomes are the values of the outcome label.
var Outcomes = []string{"allowed", "denied", "degraded", "error"}

// BreakerStates are the values of the breaker state label.
var BreakerStates = []string{"closed", "open", "half-open", Other}

// New returns an Observer whose metrics are registered with reg (for
// example prometheus.DefaultRegisterer, or a prometheus.NewRegistry()). It
// returns reg's error when a metric of the same name is already registered
// (two Observers need distinct Namespaces or registries), having
// registered none of its own, and an error for a nil reg or a
// NearLimitRatio outside (0, 1].
func New(reg prometheus.Registerer, opts Options) (*Observer, error) {
	if store.IsNil(reg) {
		return nil, errors.New("sluice/observe/prometheus: the Registerer is nil (prometheus.DefaultRegisterer, or a prometheus.NewRegistry())")
	}
	if opts.Namespace == "" {
		opts.Namespace = "sluice"
	}
	if opts.NearLimitRatio == 0 {
		opts.NearLimitRatio = DefaultNearLimitRatio
	}
	if !(opts.NearLimitRatio > 0 && opts.NearLimitRatio <= 1) {
		return nil, fmt.Errorf("sluice/observe/prometheus: NearLimitRatio must lie in (0, 1], got %v", opts.NearLimitRatio)
	}
	if opts.MaxPolicies <= 0 {
		opts.MaxPolicies = DefaultMaxPolicies
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets
	}
	// client_golang panics on buckets out of order, at the first
	// observation rather than here: refuse them here.
	for i := 1; i < len(opts.Buckets); i++ {
		if !(opts.Buckets[i] > opts.Buckets[i-1]) {
			return nil, fmt.Errorf("sluice/observe/prometheus: Buckets must increase, got %v after %v", opts.Buckets[i], opts.Buckets[i-1])
		}
	}
	// A constant label named as one of the metrics' own would fail that
	// metric's registration; and a registry, which keeps every name's
	// label names for its life, would refuse that metric even after a
	// corrected New.
	for name := range opts.ConstLabels {
		if slices.Contains([]string{"policy", "outcome", "op", "breaker", "state"}, name) {
			return nil, fmt.Errorf("sluice/observe/prometheus: ConstLabels may not name %q, a label of the metrics' own", name)
		}
	}
	ns, cl := opts.Namespace, opts.ConstLabels
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: cl}, labels)
	}
	o := &Observer{
		ratio:       opts.NearLimitRatio,
		maxPolicies: opts.MaxPolicies,
		breakers:    map[string]string{},
		others:      map[string]string{},
		decisions:   counter("decisions_total", "Rate-limit decisions, by policy and outcome (allowed, denied, degraded: made by the failure policy, error).", "policy", "outcome"),
		nearLimit:   counter("near_limit_total", "Admissions that left the identity past the near-limit ratio of its limit.", "policy"),
		shadow:      counter("shadow_refusals_total", "Refusals that a shadow-mode limiter admitted.", "policy"),
		unknown:     counter("unknown_outcomes_total", "Store calls whose outcome is unknown (the update may or may not have happened).", "policy"),
		releaseErrs: counter("release_errors_total", "Lease releases that failed (each is tried again in the background; a slot whose every try fails is reclaimed after the lease TTL).", "policy"),
		denyHits:    counter("deny_cache_hits_total", "Refusals answered by the deny cache without a store call.", "policy"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "store_call_duration_seconds", ConstLabels: cl,
			Help:                            "Duration of the store call behind a decision or release, failure policy included.",
			Buckets:                         opts.Buckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: 3600e9,
		}, []string{"policy", "op"}),
		fallback:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "fallback_active", Help: "1 while the policy decides through its fallback.", ConstLabels: cl}, []string{"policy"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "breaker_state", Help: "1 for the circuit breaker's current state, 0 for the others.", ConstLabels: cl}, []string{"breaker", "state"}),
		breakerTrans: counter("breaker_transitions_total", "Circuit breaker state changes, by the state entered (state=\"closed\": recoveries).", "breaker", "state"),
	}
	empty := map[string]*series{}
	o.policies.Store(&empty)
	cs := []prometheus.Collector{o.decisions, o.nearLimit, o.shadow, o.unknown, o.releaseErrs, o.denyHits, o.latency, o.fallback, o.breakerState, o.breakerTrans}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			// Leave reg as it was: a corrected New must find no metric
			// of this Observer's left behind.
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("sluice/observe/prometheus: %w", err)
		}
	}
	return o, nil
}

// Observe records one event. It is a core.Config.Observer, and allocates
// nothing once the event's policy has been seen.
func (o *Observer) Observe(e core.Event) {
	s := o.series(e.Policy)
	if e.Op == "release" {
		if e.Duration > 0 {
			s.release.Observe(e.Duration.Seconds())
		}
		if e.Err != nil {
			s.releaseErrs.Inc()
			if errors.Is(e.Err, core.ErrOutcomeUnknown) {
				s.unknown.Inc()
			}
		}
		return
	}
	d := &e.Decision
	switch {
	case d.Degraded:
		s.degraded.Inc()
	case e.Err != nil:
		s.errored.Inc()
	case d.Allowed:
		s.allowed.Inc()
		// A shadow admission was a refusal: it is not near the limit, it
		// is past it (NearLimit says no). A Multi's is near when any of its
		// limits is.
		if e.NearLimit(o.ratio) {
			s.nearLimit.Inc()
		}
	default:
		s.denied.Inc()
	}
	if e.Shadowed {
		s.shadow.Inc()
	}
	if e.DenyCached {
		s.denyHits.Inc()
	}
	if e.Err != nil && errors.Is(e.Err, core.ErrOutcomeUnknown) {
		s.unknown.Inc()
	}
	if e.Duration > 0 {
		if e.Op == "acquire" {
			s.acquire.Observe(e.Duration.Seconds())
		} else {
			s.allow.Observe(e.Duration.Seconds())
		}
	}
}

// series returns policy's children, resolving them on first sight.
func (o *Observer) series(policy string) *series {
	if s, ok := (*o.policies.Load())[policy]; ok {
		return s
	}
	return o.resolve(policy)
}

// resolve adds policy's children, or returns Other's when MaxPolicies
// names already have their own.
func (o *Observer) resolve(policy string) *series {
	// A label value must be UTF-8 (client_golang panics otherwise): a
	// Limiter's policy names are checked, a hook's are the application's.
	policy = strings.ToValidUTF8(policy, "\uFFFD")
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.policies.Load()
	if s, ok := old[policy]; ok {
		return s
	}
	if len(old) >= o.maxPolicies && policy != Other {
		if s, ok := old[Other]; ok {
			return s
		}
		policy = Other // the (max+1)th entry, kept apart from the bound
	}
	next := make(map[string]*series, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	s := &series{
		allowed:     o.decisions.WithLabelValues(policy, "allowed"),
		denied:      o.decisions.WithLabelValues(policy, "denied"),
		degraded:    o.decisions.WithLabelValues(policy, "degraded"),
		errored:     o.decisions.WithLabelValues(policy, "error"),
		nearLimit:   o.nearLimit.WithLabelValues(policy),
		shadow:      o.shadow.WithLabelValues(policy),
		unknown:     o.unknown.WithLabelValues(policy),
		releaseErrs: o.releaseErrs.WithLabelValues(policy),
		denyHits:    o.denyHits.WithLabelValues(policy),
		allow:       o.latency.WithLabelValues(policy, "allow"),
		acquire:     o.latency.WithLabelValues(policy, "acquire"),
		release:     o.latency.WithLabelValues(policy, "release"),
		fallback:    o.fallback.WithLabelValues(policy),
	}
	next[policy] = s
	o.policies.Store(&next)
	return s
}

// DenyCacheHit counts one refusal of policy answered by a deny cache
// without a store call. Observe counts those of core's deny cache itself
// (Event.DenyCached); DenyCacheHit is for a cache of your own.
func (o *Observer) DenyCacheHit(policy string) { o.series(policy).denyHits.Inc() }

// SetFallbackActive records whether policy decides through its fallback
// now (sluice_fallback_active 1 or 0). Wire it to whatever enters and
// leaves the fallback (a circuit breaker's state change, for one).
func (o *Observer) SetFallbackActive(policy string, active bool) {
	v := 0.0
	if active {
		v = 1
	}
	o.series(policy).fallback.Set(v)
}

// BreakerStateChanged records that the circuit breaker name entered state:
// "closed", "open" or "half-open" ("half_open" and "halfopen" are read as
// "half-open"; anything else counts as Other). sluice_breaker_state is then
// 1 for that state and 0 for the others, and, when state is not the one
// last reported for name, sluice_breaker_transitions_total{state} counts
// one more change. Before its first report a breaker is taken to be
// closed, as every breaker starts: the initial report of closed, like a
// repeated state, sets the gauge and counts no change. Wire it to the
// breaker's OnStateChange callback; call it once with the initial state so
// that the series exist before the first change (every state's transition
// counter is created at 0 on the first report, so that increase() sees the
// first change into it).
func (o *Observer) BreakerStateChanged(name, state string) {
	switch state {
	case "closed", "open", "half-open":
	case "half_open", "halfopen":
		state = "half-open"
	default:
		state = Other
	}
	// A label value must be UTF-8 (client_golang panics otherwise), and a
	// breaker's name is the application's, unchecked.
	name = strings.ToValidUTF8(name, "\uFFFD")
	o.mu.Lock()
	defer o.mu.Unlock()
	last, seen := o.breakers[name]
	switch {
	case seen:
		o.breakers[name] = state
	case len(o.breakers) < o.maxPolicies:
		o.breakers[name] = state
		last = "closed"
		o.newBreaker(name)
	default:
		// Past the bound: counted under Other, each name's changes told
		// apart as long as it is remembered.
		if _, ok := o.breakers[Other]; !ok {
			o.breakers[Other] = "closed"
			o.newBreaker(Other)
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
	for _, st := range BreakerStates {
		v := 0.0
		if st == state {
			v = 1
		}
		o.breakerState.WithLabelValues(name, st).Set(v)
	}
	if state != last {
		o.breakerTrans.WithLabelValues(name, state).Inc()
	}
}

// newBreaker creates name's transition counters, at 0.
func (o *Observer) newBreaker(name string) {
	for _, st := range BreakerStates {
		o.breakerTrans.WithLabelValues(name, st)
	}
}
