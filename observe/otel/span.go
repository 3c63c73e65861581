package otel

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/core"
)

// RefusalEvent is the name of the span event RecordRefusal adds.
const RefusalEvent = "sluice.rate_limiting.refused"

// RecordRefusal adds the event RefusalEvent to the span in ctx when d is a
// refusal (not Allowed), with the policy, the limit, the remaining count
// and the retry delay in seconds (sluice.rate_limiting.retry_after). It
// does nothing for an admission, or when ctx holds no recording span. For
// HTTP and gRPC doors, which hold the request's context where the Observer
// does not.
func RecordRefusal(ctx context.Context, policy string, d core.Decision) {
	if d.Allowed {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(RefusalEvent, trace.WithAttributes(
		PolicyKey.String(strings.ToValidUTF8(policy, "\uFFFD")), // as the observer's (see resolve)
		attribute.Int64("sluice.rate_limiting.limit", d.Limit),
		attribute.Int64("sluice.rate_limiting.remaining", d.Remaining),
		attribute.Float64("sluice.rate_limiting.retry_after", d.RetryAfter.Seconds()),
	))
}
