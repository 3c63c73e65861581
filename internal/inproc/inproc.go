// Package inproc is the in-process fast path between core.Limiter and a
// store that answers without I/O (store/memory). It is internal: no
// application calls it and no store author needs it, so none of it appears
// in the documentation of core or store. core cannot import this package
// (it imports core), so core matches these interfaces by their method sets;
// a store that implements them declares so with
//
//	var _ inproc.Binder = (*Store)(nil)
//
// and the compiler keeps both sides in step.
package inproc

import (
	"time"

	"github.com/sluicehq/sluice/core"
)

// InProcess marks a store that answers without I/O. The Limiter skips the
// per-call deadline for it, which would cost more than the decision itself.
type InProcess interface {
	InProcess()
}

// Taker is a Binder's fast path for one namespace. Take must do for the key
// Key{Namespace: namespace, Identity: identity} exactly what Update does
// with a Timed Mutation whose Now is now and whose Apply calls
// alg.Step(state, now, n, p): the same atomicity, key, expiry and errors. It
// returns the Decision of the step, or a zero Decision with the error. (An
// alias of an interface literal, so that core, which cannot import this
// package, names the same type.)
type Taker = interface {
	Take(identity string, alg core.Algorithm, now, n int64, p *core.Policy) (core.Decision, error)
}

// FieldTaker is a Taker that also returns the Decision of Take field by
// field, so that every one comes back in a register: a Decision returned
// whole comes back through a stack copy that stalls on store forwarding (it
// reads 16 bytes at a time what was stored a field at a time), a tenth of an
// in-memory decision. A Limiter calls TakeFields when its Taker has it; its
// results must be Take's. (An alias, as Taker is.)
type FieldTaker = interface {
	Take(identity string, alg core.Algorithm, now, n int64, p *core.Policy) (core.Decision, error)
	TakeFields(identity string, alg core.Algorithm, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error)
}

// ClockedTaker is a FieldTaker that reads the decision's time itself, by
// calling clock while it holds the key's lock; its results must be those
// of TakeFields at that time. A Limiter whose step is clamped for clock
// skew (one with a Clock of its own) calls it when its Taker has it: with
// the time read before the lock, a decision could be stepped after one
// that read the clock later, a step back of the clock that the clamp takes
// for a clock behind, and corrects by giving units out again. (An alias,
// as Taker is.)
type ClockedTaker = interface {
	TakeFieldsClocked(identity string, alg core.Algorithm, clock func() int64, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error)
}

// PeekCap is the longest state a Peeker is handed.
const PeekCap = 24

// Peeker is an algorithm whose decisions that write nothing an in-process
// store may make without its lock, from a copy of the key's state: a
// refusal of GCRA or a token bucket reads the state and leaves it as it
// was, so a key that every caller is refused need not be written, nor
// locked, by any of them. The state is the first size bytes of w0, w1, w2
// laid out little-endian (PeekCap bytes at most). Peek must return what
// Step(state, now, n, p) would, field by field, with ok, when that step
// returns a nil next (it writes nothing); and ok false when the step
// would write.
//
// The state comes in three words and the Decision goes back in its fields,
// all in registers: a slice passed through an interface escapes to the
// heap, and an array or a Decision passed whole is copied through memory
// in 16-byte moves of what was stored 8 bytes at a time, a stall on store
// forwarding for each (together a third of a refusal). The algorithm
// package implements it for its O(1) algorithms by running Step itself on
// a copy of the state on its own stack.
type Peeker interface {
	Peek(w0, w1, w2 uint64, size int, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, ok bool)
}

// Binder is the fast path of an InProcess store. A Limiter binds once, in
// New, to its namespace, and then decides every Allow with the Taker it
// got, instead of Update with a pooled Mutation: in memory, the Mutation's
// pool, its interface calls and the Decision copies it carries were a fifth
// of a decision. Take has no context: it is for a store that never
// waits on I/O. Acquire and Release still go through Update. A Limiter
// ignores Binder on a store that is not InProcess, and when it runs scripts.
type Binder interface {
	InProcess
	Bind(namespace string) Taker
}

// Timed is implemented by every Mutation a Limiter passes: Now is the
// Limiter's clock reading for the decision, in µs since the Unix epoch, the
// same now the algorithm steps with. An in-process store uses it for expiry
// instead of reading a clock of its own (a clock read costs as much as the
// rest of an in-memory decision), and so expires keys on the time line their
// TTLs were computed on.
type Timed interface {
	Now() int64
}

// Retimer is implemented by every Mutation a Limiter passes. store.CASUpdate
// calls Retime before each Apply, so that the write that lands is decided at
// the time of its own attempt (see store.CASUpdate).
type Retimer interface {
	Retime()
}
