package core

import (
	"context"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/ctxend"
)

// The per-call deadline. context.WithTimeout costs five allocations a call,
// as many as the rest of a network decision, and most of a pipelined
// client's garbage. A caller whose context can never be cancelled (the
// common case outside a request handler: context.Background, or a context
// that only carries values) needs no context of its own to get a deadline:
// every call that starts within one granule shares one, the tick, whose
// deadline is the granule's start plus Timeout plus the granule. A call's
// deadline is so never shorter than Timeout and at most one granule longer:
// Timeout/64, and at most a millisecond. A caller whose context can be
// cancelled still gets a context.WithTimeout of it, so that its
// cancellation reaches the store at once. The tick is marked as a context
// that ends at its deadline alone (internal/ctxend), so that a store whose
// client sees only deadlines pays nothing to watch for a cancellation.

// maxGranule bounds how much later than Timeout a shared deadline may fall.
const maxGranule = time.Millisecond

// tick is one granule's shared deadline.
type tick struct {
	ctx context.Context // context.WithDeadline of context.Background
	// release is ctx's cancel. Nothing calls it: calls share the tick, so
	// none may end it early; its timer ends it, and frees it, at the
	// deadline.
	release context.CancelFunc
	until   time.Duration // monotonic time (since monoBase) the tick is handed out until
}

// monoBase anchors the monotonic readings the ticks are compared by.
var monoBase = time.Now()

func noCancel() {}

// deadline returns ctx with the limiter's deadline for one store call, and
// the function that releases it (which the caller must call).
func (l *Limiter) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if !l.needsDeadline(ctx) {
		return ctx, noCancel
	}
	if ctx.Done() != nil {
		return context.WithTimeout(ctx, l.cfg.Timeout)
	}
	t := l.tick()
	if ctx == context.Background() || ctx == context.TODO() {
		return t, noCancel
	}
	return &valuesCtx{Context: t, parent: ctx}, noCancel
}

// tick returns the shared deadline context of the current granule.
func (l *Limiter) tick() context.Context {
	now := time.Since(monoBase)
	if t := l.ticks.Load(); t != nil && now < t.until {
		return t.ctx
	}
	g := min(l.cfg.Timeout/64, maxGranule)
	end := now + l.cfg.Timeout + g
	if end < now {
		end = math.MaxInt64 // a Timeout of centuries: never before it
	}
	t := &tick{until: now + g}
	t.ctx, t.release = context.WithDeadline(context.Background(), monoBase.Add(end))
	t.ctx = ctxend.DeadlineOnly(t.ctx) // no store needs to watch it for a cancellation
	// Two calls that both find the last tick stale may both make one; the
	// later store wins and the other serves its one call. Either is right.
	l.ticks.Store(t)
	return t.ctx
}

// valuesCtx is a shared tick for one caller whose context carries values
// but can never be cancelled: Done, Deadline and Err are the tick's, Value
// is the caller's. The tick answers first only for the key by which the
// context package finds a parent's cancellation and for ctxend's mark (it
// has no other values), so that a context a store derives from this one
// hangs off the tick's cancellation directly, with no goroutine to watch
// it, and the store sees that it can end only at its deadline.
type valuesCtx struct {
	context.Context // the tick
	parent          context.Context
}

func (c *valuesCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.parent.Value(key)
}
