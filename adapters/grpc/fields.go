package sluicegrpc

import (
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core"
	"google.golang.org/grpc/metadata"
)

// This file writes the IETF RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11) as gRPC metadata, with the same
// Structured Field List syntax (RFC 9651) as the HTTP policy:
//
//	ratelimit-policy: "per-ip";q=100;w=60, "streams";q=4;qu="concurrent-requests"
//	ratelimit: "per-ip";r=41;t=17, "streams";r=3;t=60
//
// Policy names are SF Strings; core.Policy.Validate allows only
// [A-Za-z0-9._-] in a name, so a name never needs escaping.
// outcome is one layer's decision for one call.
type outcome struct {
	layer *layer
	d     core.Decision
	n     int64 // the units the call cost at this layer
}

// retryDelay is the wait of a call refused by the last layer of outs: the
// longest over every layer that a retry could not pass now. That is the
// refusing layer's RetryAfter, and also, for each earlier rate layer that
// admitted the call but kept fewer units than it costs, the time until that
// layer's quota is whole (ResetAfter): it would refuse the retry until
// then. This is the HTTP policy's Retry-After, kept exact instead of in
// whole seconds; it errs late, never early. An earlier concurrency layer
// does not count: its lease is released with the refusal; nor does a
// shadow layer, which never refuses.
func retryDelay(outs []outcome) time.Duration {
	last := len(outs) - 1
	ra := outs[last].d.RetryAfter
	for i := range outs[:last] {
		o := &outs[i]
		if !o.layer.leaser && !o.layer.shadow && o.d.Remaining < o.n {
			ra = max(ra, o.d.ResetAfter)
		}
	}
	return max(ra, 0)
}

// fields returns the ratelimit-policy and ratelimit metadata from the
// decisions that were made for this call: the same decisions that admitted
// or refused it, never a second read (a refunded layer's Remaining has its
// refund added: see refund in admit). A Degraded decision gets no ratelimit
// item: fail open knows nothing about the quota, and a fallback limiter's
// counts are not the fleet's. Each t is its layer's own reset.
func (p *Policy) fields(outs []outcome) metadata.MD {
	var buf [256]byte
	b := buf[:0]
	for i := range outs {
		o := &outs[i]
		if o.d.Degraded || o.layer.shadow {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, o.layer.item...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(o.d.Remaining, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, seconds(o.d.ResetAfter), 10)
	}
	if len(b) == 0 {
		if p.policyField == "" { // every layer is in shadow mode
			return nil
		}
		return metadata.MD{MetadataRateLimitPolicy: {p.policyField}}
	}
	// Both values share one backing array, each capped so that an append
	// to one copies instead of overwriting the other.
	vs := []string{p.policyField, string(b)}
	return metadata.MD{MetadataRateLimitPolicy: vs[0:1:1], MetadataRateLimit: vs[1:2:2]}
}
