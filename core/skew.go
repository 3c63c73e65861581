package core

import (
	"time"

	"github.com/sluicehq/sluice/store"
)

// WithClockSkew returns alg as a Limiter runs it over a store that declares
// skew (ClockSkewer): each Step (and Acquire and Release, for a Leaser)
// first clamps the state (Clamper), and a call that writes nothing after a
// clamp writes the clamped state, so that the next call does not meet the
// far-ahead time again. The result is a Leaser when alg is one. An alg that
// is not a Clamper is returned as it is, and so is alg for a negative skew.
// The conformance suite uses it as the specification of the generic path.
func WithClockSkew(alg Algorithm, skew time.Duration) Algorithm {
	c, ok := alg.(Clamper)
	if !ok || skew < 0 {
		return alg
	}
	us := int64(skew / time.Microsecond)
	if l, ok := alg.(Leaser); ok {
		return &clampedLeaser{clamped{Algorithm: alg, c: c, skew: us}, l}
	}
	return &clamped{Algorithm: alg, c: c, skew: us}
}

// clampFor is what a Limiter steps with on store s: alg clamped for the
// store's declared skew, unless one clock decides every step (oneClock: a
// script, on the server's clock; or an in-process store under a Limiter
// with no Clock of its own, whose reading of the wall clock is anchored to
// the process's monotonic clock and so never runs ahead of itself, and
// whose states in that store every other such Limiter writes on the same
// line) or the store declares none. A Limiter over an in-process store with
// a Clock of its own still clamps, as it may share the store with another
// whose Clock runs ahead; the clamp costs a fifth of an in-memory decision.
func clampFor(s store.Store, alg Algorithm, leaser Leaser, oneClock bool) (Algorithm, Leaser) {
	sk, ok := s.(store.ClockSkewer)
	if oneClock || !ok {
		return alg, leaser
	}
	step := WithClockSkew(alg, max(sk.ClockSkew(), 0))
	if leaser != nil {
		if l, ok := step.(Leaser); ok {
			leaser = l
		}
	}
	return step, leaser
}

type clamped struct {
	Algorithm
	c    Clamper
	skew int64
}

func (a *clamped) Step(state []byte, now, n int64, p *Policy) ([]byte, time.Duration, Decision) {
	state, cttl, c := a.c.Clamp(state, now, a.skew, p)
	next, ttl, d := a.Algorithm.Step(state, now, n, p)
	if next == nil && c {
		return state, cttl, d
	}
	return next, ttl, d
}

type clampedLeaser struct {
	clamped
	l Leaser
}

func (a *clampedLeaser) Acquire(state []byte, now int64, lease uint64, p *Policy) ([]byte, time.Duration, Decision) {
	state, cttl, c := a.c.Clamp(state, now, a.skew, p)
	next, ttl, d := a.l.Acquire(state, now, lease, p)
	if next == nil && c {
		return state, cttl, d
	}
	return next, ttl, d
}

func (a *clampedLeaser) Release(state []byte, now int64, lease uint64, p *Policy) ([]byte, time.Duration) {
	state, cttl, c := a.c.Clamp(state, now, a.skew, p)
	next, ttl := a.l.Release(state, now, lease, p)
	if next == nil && c {
		return state, cttl
	}
	return next, ttl
}
