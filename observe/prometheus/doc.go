// Package prometheus exports what Sluice's limiters decide as Prometheus
// metrics (client_golang), in a module of its own: a program that does not
// import it never pulls client_golang.
//
//	obs, err := prometheus.New(prometheus.DefaultRegisterer, prometheus.Options{})
//	lim, err := core.New(core.Config{..., Observer: obs.Observe})
//
// # Metrics
//
// With the default namespace "sluice":
//
//	sluice_decisions_total{policy,outcome}     counter; outcome is allowed, denied, degraded or error
//	sluice_near_limit_total{policy}            counter; admissions past NearLimitRatio of the limit
//	sluice_shadow_refusals_total{policy}       counter; refusals a shadow limiter admitted
//	sluice_unknown_outcomes_total{policy}      counter; store errors matching core.ErrOutcomeUnknown
//	sluice_release_errors_total{policy}        counter; lease releases that failed
//	sluice_store_call_duration_seconds{policy,op}  histogram (classic buckets and native)
//	sluice_deny_cache_hits_total{policy}       counter; DenyCacheHit
//	sluice_fallback_active{policy}             gauge 0/1; SetFallbackActive
//	sluice_breaker_state{breaker,state}        gauge, 1 for the current state; BreakerStateChanged
//	sluice_breaker_transitions_total{breaker,state}  counter; changes into state (state="closed": recoveries)
//
// and, from NewStoreCollector, per store (store label):
//
//	sluice_store_evictions_total       live keys a memory store evicted
//	sluice_cas_updates_total           updates that ran the compare-and-swap loop (memcache)
//	sluice_cas_attempts_total          compare-and-swap attempts they made
//	sluice_cas_conflicts_total         swaps lost to another writer (each one more attempt)
//	sluice_cas_contention_total        updates that gave up after the retry bound
//
// outcome: "degraded" is every decision the failure policy made (fail open,
// or the fallback limiter, whatever it decided); "error" is a decision
// returned as an error (the store could not decide under FailClosed, the
// caller's context ended, or a door could not resolve a tier:
// core.Multi.ObserveFailure); "allowed" counts every admission, a shadow
// limiter's included (sluice_shadow_refusals_total counts those apart), so
// the four outcomes sum to the decisions made. Releases are not decisions:
// they feed the histogram (op="release") and sluice_release_errors_total.
// A failed release, and an Acquire whose outcome is unknown, are released
// again in the background (core.Limiter.Acquire): their last attempt is one
// more release event, counted as an error when it failed too.
// sluice_unknown_outcomes_total counts the store calls the Limiter reports
// as ErrOutcomeUnknown; a call whose caller's context ended is reported
// with the context's error instead, and is not counted there, even when
// its command had been sent.
//
// The histogram times store calls only: a decision of an in-process store
// (the memory store's fast path) has no Event.Duration and is not observed.
//
// # Cardinality
//
// Labels are the policy name, the outcome (4 values), the operation (3
// values: allow, acquire, release), the breaker name and its state (4
// values: closed, open, half-open, other), the store name. Never an
// identity: an attacker cannot grow a series. At most Options.MaxPolicies
// (default 1000) distinct policy names get series of their own, and as many
// breaker names; later ones are counted under "other". A policy has 10
// series and 3 histograms (allow, acquire, release: 14 series each with
// the default 11 buckets, +Inf, _sum and _count, and a native histogram),
// so the observer holds at most 52 series a policy: some 52,000 at the
// default bound.
//
// # Cost
//
// Observe allocates nothing: the children of every metric are resolved once
// per policy, on its first event, and kept in a copy-on-write map read
// through an atomic pointer. See BenchmarkObserver.
//
// # Hooks for state the Observer cannot see
//
// A circuit breaker and a fallback are states, not decisions: wire
// BreakerStateChanged to a breaker's state-change callback (and report its
// initial state once: that counts no transition, but creates the series),
// SetFallbackActive to whatever enters and leaves the fallback (from a
// breaker's callback: active while the breaker is not closed, since one
// outage alternates between open and half-open), and DenyCacheHit to a
// deny cache's hits. Each is safe for concurrent use.
package prometheus
