// Package guard keeps a Limiter quick and honest while its store fails: a
// circuit breaker around the store (Breaker), a fallback limiter sized to
// the fleet (FleetFallback), and a pre-filter sized alike (PreFilter).
//
// # Circuit breaker
//
// Without a breaker, every call during an outage waits for the Limiter's
// Timeout (100 ms by default) before the failure policy decides, so a fleet
// that fails open still adds the whole Timeout to each request. A Breaker
// (sony/gobreaker v2) counts the store's failures and, once it opens, refuses
// calls at once with an error matching ErrOpen and core.ErrUnavailable (but
// not core.ErrOutcomeUnknown: nothing was sent), so the failure policy
// decides in microseconds:
//
//	br := guard.NewBreaker(store, nil)
//	lim, err := core.New(core.Config{Store: br.Store(), Failure: core.FailOpen, ...})
//
// Defaults (BreakerOptions): open after 5 failures in a row, or when half of
// at least 20 calls in a rolling 10 s window failed; stay open 250 ms, then
// let 3 probe calls through (half-open); 3 successes close it, one failure
// opens it for another 250 ms. A restarted store is so used again within
// Cooldown plus one call of its client reaching it again: go-redis, after
// PoolSize failed dials in a row, stops dialling and tries once a second
// (its pool's own breaker), which can add up to a second. A deadline counts as a failure when
// it gave the call at least BreakerOptions.Timeout (default
// core.DefaultTimeout: set it to the Limiters' Config.Timeout); a shorter
// one was the caller's own.
//
// Observers see the state two ways: Breaker.State, read at any time, and
// BreakerOptions.OnStateChange, called on every change. An open breaker
// turns half-open when its Cooldown ends, by a timer of its own that calls
// nothing but OnStateChange (a half-open breaker probes the store with the
// next calls), so that a service that stops calling after an outage does
// not report its breaker open for ever; Breaker.Stop ends the timer, and
// closing the breaker's store stops it too. The Limiter's Observer also
// hears each refused call: its Event.Err matches ErrOpen.
//
// One outage is often several openings: each probe that fails opens the
// breaker again for another Cooldown, so a 2-second stall under traffic
// is open, half-open, open, ... and closed once, when the store answers
// again. Count outages by the changes into closed (recoveries), not by
// the openings.
//
// # A fallback sized to the fleet
//
// FailFallback asks a local limiter when the store cannot decide. A local
// limiter with the global policy would let a fleet of N instances admit N
// times the limit; FleetFallback divides the policy by the fleet's size,
// which a Fleet knows: configured (FleetOptions.Size), or counted from the
// heartbeats each instance writes to the store (one key, every Interval:
// 1 s by default; an instance is counted until 3 Intervals after its last
// heartbeat; at most 1024 instances). During an outage the last count
// holds. The bound is on FleetFallback.
//
//	fleet, _ := guard.NewFleet(&guard.FleetOptions{Store: store})
//	fb, _ := guard.FleetFallback(core.Config{Policy: p, Algorithm: alg, Store: memory.New(nil)}, fleet)
//	lim, _ := core.New(core.Config{Policy: p, Algorithm: alg, Store: br.Store(), Failure: core.FailFallback, Fallback: fb})
//
// # A pre-filter sized to the fleet
//
// PreFilter builds a limiter for core.Config.PreFilter: the global policy
// scaled to headroom × Limit / N per instance (headroom 2 by default),
// which refuses floods in process before they cost a round trip. Its doc
// says how to size it so that it never refuses what the global limit would
// admit.
//
// One breaker guards one store, every key of it: on a Redis Cluster that
// lost one master of three, a third of the calls fail, which opens the
// breaker only when the failures come 5 in a row or reach the ratio.
package guard
