package otel

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice/core"
)

func TestRecordRefusal(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	RecordRefusal(ctx, "api", core.Decision{Allowed: true, Limit: 10, Remaining: 3})
	RecordRefusal(ctx, "api", core.Decision{Limit: 10, RetryAfter: 1500 * time.Millisecond})
	span.End()
	RecordRefusal(context.Background(), "api", core.Decision{Limit: 10}) // no span: nothing

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	evs := spans[0].Events()
	if len(evs) != 1 || evs[0].Name != RefusalEvent {
		t.Fatalf("events %+v; want one %s", evs, RefusalEvent)
	}
	got := attribute.NewSet(evs[0].Attributes...)
	want := attribute.NewSet(
		PolicyKey.String("api"),
		attribute.Int64("sluice.rate_limiting.limit", 10),
		attribute.Int64("sluice.rate_limiting.remaining", 0),
		attribute.Float64("sluice.rate_limiting.retry_after", 1.5),
	)
	if !got.Equals(&want) {
		t.Fatalf("attributes %v; want %v", got.Encoded(attribute.DefaultEncoder()), want.Encoded(attribute.DefaultEncoder()))
	}
}

// A policy name given by the application is made valid UTF-8, as the
// observer's attributes are: OTLP's strings must be.
func TestRecordRefusalUTF8(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	RecordRefusal(ctx, "pol\xff", core.Decision{Limit: 10, RetryAfter: time.Second})
	span.End()
	for _, kv := range rec.Ended()[0].Events()[0].Attributes {
		if v := kv.Value.AsString(); kv.Value.Type() == attribute.STRING && !utf8.ValidString(v) {
			t.Errorf("attribute %s=%q is not UTF-8", kv.Key, v)
		}
	}
}
