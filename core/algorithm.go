package core

import (
	"time"

	"github.com/sluicehq/sluice/store"
)

// Algorithm is a pure step over one key's state: no I/O, no clock reads.
//
// Step decides whether n units are admitted at time now (µs since the Unix
// epoch) under policy p, given the key's state (empty when the key is new or
// expired). It returns the next state, the TTL after which the key may be
// dropped (when it would read as fresh anyway), and the decision. A nil next
// means the state is unchanged and nothing needs writing (a denial, usually).
// Step may write next into state's backing array.
//
// Step must survive any state, including one it did not write (it treats
// undecodable state as absent), and any now, including one that moves
// backwards. The Limiter has already checked 1 <= n <= Quota(p) and
// p.Validate(); Step need not check again.
type Algorithm interface {
	Name() string
	// Quota is the most units that can be admitted at once from a fresh
	// state. It is Decision.Limit, and a cost above it is an error.
	Quota(p *Policy) int64
	Step(state []byte, now, n int64, p *Policy) (next []byte, ttl time.Duration, d Decision)
}

// PolicyChecker is implemented by algorithms that need tighter bounds on a
// Policy than Validate gives (the sliding log keeps one entry per unit, so it
// caps Limit). The Limiter calls it after Validate.
type PolicyChecker interface {
	CheckPolicy(p *Policy) error
}

// Uncharger is implemented by an algorithm whose admission moves
// ResetAfter later by the units it charged (GCRA, the token bucket and the
// leaky bucket push their one time later by n·IntervalMicros). Uncharged
// returns the ResetAfter that d, an admission of n at p, would have
// reported had the n units not been charged: what a refused multi-limit
// decision, which charges nothing, reports for a limit that would have
// admitted. For any other algorithm it reports ResetAfter as it was, which
// is exact (a window's end) or errs late (the sliding log's and the
// sliding counter's: the time the charge itself would have left counted).
type Uncharger interface {
	Uncharged(d Decision, n int64, p *Policy) time.Duration
}

// Clamper is implemented by an algorithm whose state holds times (all seven
// of package algorithm). A Limiter over a store that declares a clock skew
// (ClockSkewer) runs Clamp before every step of its own clock: a state
// written by an instance whose clock runs far ahead would otherwise hold
// every instance with a correct clock still, as the steps read a stored time
// later than now, until real time catches up (an hour, for a clock an hour
// fast). Clamp bounds that to skew.
type Clamper interface {
	// Clamp returns state with every stored time that lies more than skew
	// µs beyond the latest time a step at now could have written pulled
	// back to that bound, as if its writer's clock had been skew ahead;
	// clamped reports whether anything moved, and ttl is then the clamped
	// state's TTL, at most what the policy needs plus skew. A state with
	// nothing to clamp, or that does not decode, is returned as it is. Clamp
	// is pure and may write into state's backing array.
	Clamp(state []byte, now, skew int64, p *Policy) (next []byte, ttl time.Duration, clamped bool)
}

// Scripted is implemented by algorithms that have a Lua twin. The twin
// follows the ScriptArgs convention and must decide exactly as Step does;
// the conformance suite proves it, step by step.
type Scripted interface {
	Script() *store.Script
}

// Leaser is an algorithm whose admissions are held until released: the
// concurrency limit. A lease is identified by a random non-zero id.
type Leaser interface {
	Algorithm
	// Acquire takes one slot for lease at now; the slot is reclaimed at
	// now + LeaseTTL if it is never released.
	Acquire(state []byte, now int64, lease uint64, p *Policy) (next []byte, ttl time.Duration, d Decision)
	// Release frees lease's slot, if it still holds one.
	Release(state []byte, now int64, lease uint64, p *Policy) (next []byte, ttl time.Duration)
}
