package sluicegrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adapters/internal/receipts"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// admission is what an admitted call holds until its handler returns: the
// leases of its concurrency layers. done gives them back.
type admission struct {
	ctx    context.Context
	leases []*core.Lease
	inline [4]*core.Lease
}

var admissionPool = sync.Pool{New: func() any { return new(admission) }}

// done releases the call's leases, even when its context is already
// cancelled (core releases under its own deadline). A release that fails is
// tried again in the background (core.Lease.Release), and only a store that
// stays unreachable leaves its slot to the policy's LeaseTTL. It is safe on nil.
func (a *admission) done() {
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

// fieldSink is where the rate-limit metadata goes: the server stream, or,
// for a unary call, its context (grpc.SetHeader and grpc.SetTrailer).
type fieldSink interface {
	SetHeader(metadata.MD) error
	SetTrailer(metadata.MD)
}

// admit decides c under every layer of p. On success it has set the
// rate-limit fields as headers on out (and waited out a leaky bucket's
// Delay) and returns the admission to release when the handler returns. On
// refusal or failure it has set the fields as headers and as trailers and
// returns the status error to answer with.
func (p *Policy) admit(ctx context.Context, c *Call, out fieldSink) (_ *admission, err error) {
	var inline [4]outcome
	outs := inline[:0]
	var a *admission
	// Until the call is admitted, the leases taken so far go back on every
	// way out: a refusal, and also a panic in a later layer's KeyFunc or
	// CostFunc (application code), which would otherwise hold them until
	// their LeaseTTL.
	admitted := false
	defer func() {
		if !admitted {
			a.done()
		}
	}()
	// The receipts of the rate layers charged so far: refunded when a
	// later layer refuses or cannot decide (unless Config.NoRefund).
	var receipts receipts.Set
	refund := func() {
		receipts.Refund(ctx, func(at int, k int64) {
			// What the layer has now: its remaining units, and the retry
			// delay, which no longer waits for a layer that got its units
			// back.
			o := &outs[at]
			o.d.Remaining = min(o.d.Remaining+k, o.d.Limit)
		})
	}
	var delay time.Duration
	for i := range p.layers {
		l := &p.layers[i]
		id := l.identity(c)
		var d core.Decision
		n := l.weight
		// Only a layer with another after it can be refused after it
		// admitted, or one whose request may give up while it waits out
		// a Delay: the last one needs no receipt, unless it queues or an
		// earlier layer's Delay is still to be waited out.
		keep := p.refund && (i < len(p.layers)-1 || l.queues || delay > 0)
		if l.leaser {
			var lease *core.Lease
			lease, d, err = l.lim.Acquire(ctx, id)
			if err == nil && lease != nil {
				if a == nil {
					a = admissionPool.Get().(*admission)
					a.ctx, a.leases = ctx, a.inline[:0]
				}
				a.leases = append(a.leases, lease)
			}
		} else {
			if l.cost != nil {
				if n = max(l.cost(c), 1); n > l.quota && l.shadow {
					// A shadow layer never refuses: the call, which it
					// could not count, passes it.
					continue
				} else if n > l.quota {
					refund()
					p.refuseFields(out, p.fields(outs))
					return nil, tooCostly(c, l, n)
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
			p.refuseFields(out, p.fields(outs))
			return nil, failure(ctx, c, l, err)
		}
		outs = append(outs, outcome{layer: l, d: d, n: n})
		if !d.Allowed {
			refund()
			wait := retryDelay(outs)
			md := p.fields(outs)
			md[MetadataRetryAfter] = []string{strconv.FormatInt(max(seconds(wait), 1), 10)}
			p.refuseFields(out, md)
			return nil, refusal(c, l, wait)
		}
		delay = max(delay, d.Delay)
	}
	_ = out.SetHeader(p.fields(outs))
	if delay > 0 && !sleep(ctx, delay) {
		refund()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	admitted = true
	return a, nil
}

// refuseFields sets md as headers and as trailers: a Go client reads either
// (grpc.Header, grpc.Trailer), but several other gRPC clients hand only
// the trailers to the code that sees the error.
func (p *Policy) refuseFields(out fieldSink, md metadata.MD) {
	_ = out.SetHeader(md)
	out.SetTrailer(md)
}

// refusal is the status of a call that layer l refused: ResourceExhausted,
// with a google.rpc.RetryInfo whose retry_delay is the wait, and a
// google.rpc.QuotaFailure naming the policy.
func refusal(c *Call, l *layer, wait time.Duration) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("sluicegrpc: %s is refused by rate limit %q; retry after %s", c.FullMethod, l.name, wait))
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}, l.violation); err == nil {
		st = ds
	}
	return st.Err()
}

// tooCostly is the status of a call whose cost exceeds the quota of layer
// l: ResourceExhausted without RetryInfo, since no wait would help.
func tooCostly(c *Call, l *layer, n int64) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("sluicegrpc: %s costs %d units; rate limit %q admits at most %d at once, so it can never be admitted", c.FullMethod, n, l.name, l.quota))
	if ds, err := st.WithDetails(l.violation); err == nil {
		st = ds
	}
	return st.Err()
}

// failure is the status of a call whose layer l could not decide: the
// call's own cancellation or deadline when that is what ended it,
// Internal for input core rejected (which a Config NewPolicy accepted
// cannot produce: an empty key falls back to the client address and a
// cost is checked against the quota first), and Unavailable when the store
// failed and the limiter fails closed.
func failure(ctx context.Context, c *Call, l *layer, err error) error {
	switch {
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case store.IsContextError(err) && !errors.Is(err, core.ErrUnavailable):
		// The call's own end, which core reports as soon as its deadline
		// has passed, before the context may say so.
		return status.FromContextError(err).Err()
	case errors.Is(err, core.ErrInvalidInput):
		return status.Errorf(codes.Internal, "sluicegrpc: %s: rate limit %q: %v", c.FullMethod, l.name, err)
	}
	return status.Errorf(codes.Unavailable, "sluicegrpc: %s: rate limit %q could not be checked", c.FullMethod, l.name)
}

// sleep waits for d, or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
