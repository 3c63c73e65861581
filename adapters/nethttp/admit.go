package nethttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adapters/internal/receipts"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Admission is what an admitted request holds until its handler returns:
// the leases of its concurrency layers. Done gives them back.
type Admission struct {
	ctx    context.Context
	leases []*core.Lease
	inline [4]*core.Lease
}

var admissionPool = sync.Pool{New: func() any { return new(Admission) }}

// Admit decides r under every layer of p. It is the whole HTTP policy; the
// net/http, gin and echo adapters only call it and translate.
//
// When the request may proceed, Admit returns true, having added the
// RateLimit fields to w's header (and having waited out a leaky bucket's
// Delay); the caller runs the handler and then calls Done on the returned
// Admission, in a defer, so that leases are released when the handler
// panics too. A nil *Admission is valid (Done does nothing).
//
// When the request may not proceed, Admit has already written the whole
// response and returns false; the caller must write nothing more:
//
//   - 429 with Retry-After and a quota-exceeded problem body when a layer
//     denied it (no Retry-After when its cost exceeds the layer's quota,
//     since no wait would help);
//   - 503 with a temporary-reduced-capacity problem body when a layer's
//     store could not decide and its failure policy is fail closed (no
//     Retry-After: nobody knows when the store is back);
//   - 503 when the request was cancelled before it was admitted.
//
// Skipped requests (SkipPaths, Skip) are admitted untouched. route is the
// framework's matched route pattern ("" when unknown) and v the
// application's per-request values (nil means the request's context).
// Admit never panics on client input and never answers 500, but for a
// Policy NewPolicy did not make (nil, or a zero Policy): that refuses every
// request with a 500 problem, rather than serve with no limit.
func (p *Policy) Admit(w http.ResponseWriter, r *http.Request, route string, v Values) (*Admission, bool) {
	return p.admit(w, r, route, v, false)
}

// admit is Admit; mux says that route is the ServeMux pattern that serves r
// (Middleware), whose methods Route counts as one.
func (p *Policy) admit(w http.ResponseWriter, r *http.Request, route string, v Values, mux bool) (*Admission, bool) {
	if p == nil || p.layers == nil {
		writeProblem(w, http.StatusInternalServerError, notMadeBody)
		return nil, false
	}
	if p.skipRequest(r) {
		return nil, true
	}
	q := p.newRequest(r, route, v)
	q.mux = mux
	defer freeRequest(q)
	if p.skip != nil && p.skip(q) {
		return nil, true
	}
	ctx := r.Context()
	var inline [4]outcome
	outs := inline[:0]
	var a *Admission
	// Until the request is admitted, the leases taken so far go back on
	// every way out: a refusal, and also a panic in a later layer's
	// KeyFunc or CostFunc (application code), which would otherwise hold
	// them until their LeaseTTL.
	admitted := false
	defer func() {
		if !admitted {
			a.Done()
		}
	}()
	// The receipts of the rate layers charged so far: refunded when a
	// later layer refuses or cannot decide (unless Config.NoRefund).
	var receipts receipts.Set
	refund := func() {
		receipts.Refund(ctx, func(at int, k int64) {
			// What the layer has now: its fields, and Retry-After, which
			// no longer waits for a layer that got its units back.
			o := &outs[at]
			o.d.Remaining = min(o.d.Remaining+k, o.d.Limit)
			for x := range o.states {
				o.states[x].Remaining = min(o.states[x].Remaining+k, o.states[x].Limit)
			}
		})
	}
	var delay time.Duration
	for i := range p.layers {
		l := &p.layers[i]
		id := l.identity(q)
		var d core.Decision
		var err error
		n := l.weight
		// Only a layer with another after it can be refused after it
		// admitted, or one whose request may give up while it waits out
		// a Delay: the last one needs no receipt, unless it queues or an
		// earlier layer's Delay is still to be waited out.
		keep := p.refund && (i < len(p.layers)-1 || l.queues || delay > 0)
		if l.multi != nil {
			o, rc, done := p.admitMulti(w, ctx, q, l, id, keep, outs, refund)
			if done {
				return nil, false
			}
			receipts.Add(rc, len(outs))
			outs = append(outs, o)
			if !o.d.Allowed {
				refund()
				ra := retryAfter(outs)
				h := w.Header()
				p.writeFields(h, outs)
				h[HeaderRetryAfter] = []string{strconv.FormatInt(ra, 10)}
				writeProblem(w, http.StatusTooManyRequests, violatedBody(o.states))
				return nil, false
			}
			delay = max(delay, o.d.Delay)
			continue
		}
		if l.leaser {
			var lease *core.Lease
			lease, d, err = l.lim.Acquire(ctx, id)
			if err == nil && lease != nil {
				if a == nil {
					a = admissionPool.Get().(*Admission)
					a.ctx, a.leases = ctx, a.inline[:0]
				}
				a.leases = append(a.leases, lease)
			}
		} else {
			if l.cost != nil {
				if n = max(l.cost(q), 1); n > l.quota && l.shadow {
					// A shadow layer never refuses: the request, which it
					// could not count, passes it.
					continue
				} else if n > l.quota {
					refund()
					p.writeFields(w.Header(), outs)
					writeProblem(w, http.StatusTooManyRequests, tooCostlyBody(l, n))
					return nil, false
				}
			}
			if keep {
				var rc *core.Receipt
				d, rc, err = l.lim.Charge(ctx, id, n)
				receipts.Add(rc, len(outs))
			} else {
				d, err = l.lim.AllowN(ctx, id, n)
			}
		}
		if err != nil {
			refund()
			p.writeFields(w.Header(), outs)
			if callerGone(ctx, err) {
				writeProblem(w, http.StatusServiceUnavailable, cancelledBody)
			} else {
				writeProblem(w, http.StatusServiceUnavailable, l.unavailable)
			}
			return nil, false
		}
		outs = append(outs, outcome{layer: l, d: d, n: n})
		if !d.Allowed {
			refund()
			ra := retryAfter(outs)
			h := w.Header()
			p.writeFields(h, outs)
			h[HeaderRetryAfter] = []string{strconv.FormatInt(ra, 10)}
			writeProblem(w, http.StatusTooManyRequests, l.tooMany)
			return nil, false
		}
		delay = max(delay, d.Delay)
	}
	p.writeFields(w.Header(), outs)
	if delay > 0 && !wait(ctx, delay) {
		refund()
		writeProblem(w, http.StatusServiceUnavailable, cancelledBody)
		return nil, false
	}
	admitted = true
	return a, true
}

// Done releases the request's leases, even when its context is already
// cancelled (core releases under its own deadline). A release that fails is
// tried again in the background (core.Lease.Release), and only a store that
// stays unreachable leaves its slot to the policy's LeaseTTL. Done must be
// called once; after it, a must not be used. It is safe on a nil Admission.
func (a *Admission) Done() {
	if a == nil {
		return
	}
	for _, ls := range a.leases {
		_ = ls.Release(a.ctx)
	}
	clear(a.inline[:])
	a.ctx, a.leases = nil, nil
	admissionPool.Put(a)
}

// wait sleeps for d, or until ctx ends; it reports whether d elapsed.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// tooCostlyBody is the 429 body of a request whose cost exceeds the quota.
func tooCostlyBody(l *layer, n int64) []byte {
	var pr Problem
	_ = json.Unmarshal(l.tooMany, &pr)
	pr.Detail = fmt.Sprintf("The request costs %d units; policy %q admits at most %d at once, so it can never be admitted.", n, l.name, l.quota)
	b, _ := json.Marshal(pr)
	return b
}

// admitMulti decides a multi-limit layer. done reports that it wrote the
// whole response (a cost above the limits' quota, a store that could not
// decide, a tier that could not be resolved); otherwise the outcome says
// whether the layer admitted, and rc is the charge's receipt when keep.
//
// When it answers the request itself (done), it refunds the earlier
// layers first, so that their fields show what they have after it.
func (p *Policy) admitMulti(w http.ResponseWriter, ctx context.Context, q *Request, l *layer, id string, keep bool, outs []outcome, refund func()) (o outcome, rc *core.Receipt, done bool) {
	ls := l.limits
	if l.tiers != nil {
		// The resolver sees the layer's key as the application gave it
		// (the tenant, the API key), not the form the store is keyed by.
		who := id
		if l.key != nil {
			if k := l.key(q); k != "" {
				who = k
			}
		}
		var err error
		if _, ls, err = l.tiers.Resolve(ctx, who); err != nil {
			l.multi.ObserveFailure(err) // counted with the failed decisions
			refund()
			p.writeFields(w.Header(), outs)
			writeProblem(w, http.StatusServiceUnavailable, l.unavailable)
			return o, nil, true
		}
	}
	if !keep && p.refund && l.tiers != nil && p.setOf(ls).queues {
		// The last layer, whose tiers a Set gave a queue after NewPolicy:
		// a request that gives up while it waits gets its place back.
		keep = true
	}
	n := l.weight
	if l.cost != nil {
		n = max(l.cost(q), 1)
	}
	if n > ls.Quota() {
		refund()
		p.writeFields(w.Header(), undecided(outs, l, ls))
		writeProblem(w, http.StatusTooManyRequests, tooCostlyMulti(l, ls, n))
		return o, nil, true
	}
	states := make([]core.LimitState, 0, ls.Len())
	var d core.Decision
	var err error
	if keep {
		d, states, rc, err = l.multi.Charge(ctx, id, ls, n, states)
	} else {
		d, states, err = l.multi.AllowN(ctx, id, ls, n, states)
	}
	if err != nil {
		refund()
		p.writeFields(w.Header(), undecided(outs, l, ls))
		if callerGone(ctx, err) {
			writeProblem(w, http.StatusServiceUnavailable, cancelledBody)
		} else {
			writeProblem(w, http.StatusServiceUnavailable, p.setOf(ls).unavailable)
		}
		return o, nil, true
	}
	if d.Degraded {
		states = nil // fail open knows nothing of the quotas: no items
	}
	return outcome{layer: l, d: d, n: n, states: states, limits: ls}, rc, false
}

// undecided is outs and a multi-limit layer l that answers the request
// without a decision (a cost above its quota, a store that failed): a
// tiered layer that resolved its tier then lists its limits ls in
// RateLimit-Policy, as a layer without tiers does, so that the body's
// violated-policies names items the client can pair.
func undecided(outs []outcome, l *layer, ls *core.Limits) []outcome {
	return append(outs, outcome{layer: l, limits: ls, undecided: true})
}

// tooCostlyMulti is the 429 of a cost above what ls admits at once: its
// violated-policies are the limits (the RateLimit items) whose quota the
// cost exceeds.
func tooCostlyMulti(l *layer, ls *core.Limits, n int64) []byte {
	var pr Problem
	_ = json.Unmarshal(l.tooMany, &pr)
	pr.Detail = fmt.Sprintf("The request costs %d units; the limits of %q admit at most %d at once, so it can never be admitted.", n, l.name, ls.Quota())
	pr.ViolatedPolicies = nil
	for i := range ls.Len() {
		if lm := ls.Limit(i); n > lm.Algorithm.Quota(&lm.Policy) {
			pr.ViolatedPolicies = append(pr.ViolatedPolicies, lm.Policy.Name)
		}
	}
	b, _ := json.Marshal(pr)
	return b
}

// callerGone reports whether err, a layer's failure to decide under ctx,
// is the request's own end: its context says so, or core reported its
// deadline, which it does as soon as the deadline has passed, before the
// context may say so (a store's failure is a core.ErrUnavailable, its own
// deadline included).
func callerGone(ctx context.Context, err error) bool {
	return ctx.Err() != nil || store.IsContextError(err) && !errors.Is(err, core.ErrUnavailable)
}
