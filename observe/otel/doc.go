// Package otel exports what Sluice's limiters decide as OpenTelemetry
// metrics, in a module of its own: a program that does not import it never
// pulls the OpenTelemetry API.
//
//	obs, err := otel.New(meterProvider, otel.Options{})
//	lim, err := core.New(core.Config{..., Observer: obs.Observe})
//
// OpenTelemetry has no semantic convention for rate limiting in general;
// the stable one closest to it is ASP.NET Core's aspnetcore.rate_limiting.*.
// The instruments follow its shape where it fits and OpenTelemetry's naming
// rules everywhere (dotted namespaces, UCUM units, no unit in the name, no
// _total suffix; the Prometheus exporter adds those). They mean what the
// Prometheus observer's series mean (see observe/prometheus):
//
//	sluice.rate_limiting.requests                counter {request}; policy, result
//	sluice.rate_limiting.request.time_in_queue   histogram s; policy (admissions a leaky bucket delayed: Decision.Delay)
//	sluice.rate_limiting.store.duration          histogram s; policy, operation (allow, acquire, release)
//	sluice.rate_limiting.near_limit              counter {request}; policy
//	sluice.rate_limiting.shadow_refusals         counter {request}; policy
//	sluice.rate_limiting.unknown_outcomes        counter {call}; policy
//	sluice.rate_limiting.release_errors          counter {call}; policy
//	sluice.rate_limiting.deny_cache.hits         counter {request}; policy
//	sluice.rate_limiting.fallback.active         gauge {state}; policy (0 or 1)
//	sluice.rate_limiting.breaker.state           gauge {state}; breaker, state (1 for the current one)
//	sluice.rate_limiting.breaker.transitions     counter {transition}; breaker, state (closed: recoveries)
//
// Attributes: sluice.rate_limiting.policy, sluice.rate_limiting.result
// (allowed, denied, degraded, error: ASP.NET Core's "acquired" is allowed,
// its "global_limiter" and "endpoint_limiter" are denied),
// sluice.rate_limiting.operation, sluice.rate_limiting.breaker,
// sluice.rate_limiting.breaker.state. Never an identity; at most
// Options.MaxPolicies policy names (and as many breaker names) get
// attributes of their own, the rest are "other".
//
// Two ASP.NET Core instruments have no counterpart, for a reason: the
// Observer hears decisions, not the life of a lease (a release event does
// not say which acquire it ends, and the background release of an
// unknown-outcome acquire is one too), so request_lease.duration and
// active_request_leases cannot be computed from it; and a leaky bucket's
// queue is waited out by the HTTP door, not the limiter, so queued_requests
// is not known here: its time_in_queue is.
//
// # Span events
//
// The Observer has no context, so it cannot reach the request's span. A
// door that has one calls RecordRefusal after a refusal: it adds the event
// "sluice.rate_limiting.refused" to the span in ctx.
package otel
