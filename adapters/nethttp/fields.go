package nethttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core"
)

// This file writes the IETF RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11) as Structured Field Lists
// (RFC 9651), plus Retry-After and the optional legacy X-RateLimit-* trio.
//
//	RateLimit-Policy: "per-ip";q=100;w=60, "uploads";q=4;qu="concurrent-requests"
//	RateLimit: "per-ip";r=41;t=17, "uploads";r=3;t=60
//
// Policy names are SF Strings; core.Policy.Validate allows only
// [A-Za-z0-9._-] in a name, so a name never needs escaping.
// seconds rounds d up to whole seconds (delay-seconds), 0 for d <= 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// outcome is one layer's decision for one request.
type outcome struct {
	layer *layer
	d     core.Decision
	n     int64 // the units the request cost at this layer
	// A multi-limit layer's: every limit's state, and the set decided.
	states []core.LimitState
	limits *core.Limits
	// undecided: a tiered layer that resolved its tier (limits) but did
	// not decide (a cost above its quota, a store that failed):
	// RateLimit-Policy lists its limits, RateLimit has no item for it.
	undecided bool
}

// retryAfter is the Retry-After, in whole seconds (at least 1), of a request
// refused by the last layer of outs: the longest wait over every layer that
// a retry could not pass now. That is the refusing layer's RetryAfter, and
// also, for each earlier rate layer (or limit of a multi-limit layer) that
// admitted the request but kept fewer units than it costs, the time until
// that layer's quota is whole (ResetAfter): that layer would refuse the
// retry until then. A decision states no sooner time at which n units are
// free again; for the fixed window the reset is that time exactly, the
// other algorithms may free enough units sooner, so the wait errs late,
// never early. An earlier concurrency layer does not count: its lease is
// released with the refusal, so the retry finds the slot it had; nor does
// a shadow layer, which never refuses.
func retryAfter(outs []outcome) int64 {
	last := len(outs) - 1
	ra := seconds(outs[last].d.RetryAfter)
	for i := range outs[:last] {
		o := &outs[i]
		if o.layer.leaser || o.layer.shadow {
			continue
		}
		if len(o.states) == 0 {
			if o.d.Remaining < o.n {
				ra = max(ra, seconds(o.d.ResetAfter))
			}
			continue
		}
		// A multi-limit layer: each of its limits, not only the one with
		// the fewest units left (its Decision), may hold the retry back.
		for x := range o.states {
			if s := &o.states[x]; s.Remaining < o.n {
				ra = max(ra, seconds(s.ResetAfter))
			}
		}
	}
	return max(ra, 1)
}

// writeFields adds RateLimit-Policy and RateLimit (and the legacy trio when
// enabled) from the decisions that were made for this request: the same
// decisions that admitted or refused it, never a second read (a refunded
// layer's Remaining has its refund added: see refund in admit). A Degraded
// decision gets no RateLimit item: fail open knows nothing about the
// quota, and a fallback limiter's counts are not the fleet's. Each t is
// its layer's own reset, also on a 429: Retry-After (see retryAfter) is
// what waits for every layer, so no t needs cutting to it.
// The IETF fields are added, not set: when two policies are stacked (a
// group's and a route's), the response lists the items of both, which a
// Structured Field List allows across several field lines.
func (p *Policy) writeFields(h http.Header, outs []outcome) {
	var buf [256]byte
	b := buf[:0]
	tight := -1
	for i := range outs {
		o := &outs[i]
		if o.d.Degraded || o.layer.shadow || o.undecided {
			continue
		}
		if o.states != nil {
			// One item per limit of a multi-limit layer.
			for j := range o.states {
				s := &o.states[j]
				if len(b) > 0 {
					b = append(b, ", "...)
				}
				b = append(b, '"')
				b = append(b, s.Name...)
				b = append(b, `";r=`...)
				b = strconv.AppendInt(b, max(s.Remaining, 0), 10)
				b = append(b, ";t="...)
				b = strconv.AppendInt(b, seconds(s.ResetAfter), 10)
			}
		} else {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			t := seconds(o.d.ResetAfter)
			b = append(b, o.layer.item...)
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, max(o.d.Remaining, 0), 10)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, t, 10)
		}
		if tight < 0 || !o.d.Allowed || (outs[tight].d.Allowed && o.d.Remaining < outs[tight].d.Remaining) {
			tight = i
		}
	}
	field := p.policyFieldFor(outs)
	switch {
	case len(b) == 0:
		if field != "" {
			h[HeaderRateLimitPolicy] = append(h[HeaderRateLimitPolicy], field)
		}
	case h[HeaderRateLimitPolicy] == nil && h[HeaderRateLimit] == nil:
		// The usual case, in one allocation: both fields share a backing
		// array, each capped so that a later append copies instead of
		// overwriting the other.
		vs := []string{field, string(b)}
		h[HeaderRateLimitPolicy] = vs[0:1:1]
		h[HeaderRateLimit] = vs[1:2:2]
	default:
		h[HeaderRateLimitPolicy] = append(h[HeaderRateLimitPolicy], field)
		h[HeaderRateLimit] = append(h[HeaderRateLimit], string(b))
	}
	if p.legacy && tight >= 0 {
		d := &outs[tight].d
		t := seconds(d.ResetAfter)
		h[HeaderLegacyLimit] = []string{strconv.FormatInt(d.Limit, 10)}
		h[HeaderLegacyRemaining] = []string{strconv.FormatInt(max(d.Remaining, 0), 10)}
		h[HeaderLegacyReset] = []string{strconv.FormatInt(t, 10)}
	}
}
