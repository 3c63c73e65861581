package sluicegrpc

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// failure maps what a layer's limiter returned to the call's status: the
// call's own end first, then input core rejected (a bug, never the
// client's: Internal), then a store that could not decide (Unavailable).
func TestFailureCodes(t *testing.T) {
	c := &Call{FullMethod: "/a.B/C"}
	l := &layer{name: "api"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	storeErr := &store.Error{Op: "update", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want codes.Code
	}{
		{"store failed", context.Background(), storeErr, codes.Unavailable},
		{"unknown error", context.Background(), errors.New("odd"), codes.Unavailable},
		{"invalid input", context.Background(), &core.InputError{Arg: "key", Reason: "empty"}, codes.Internal},
		{"cancelled", cancelled, context.Canceled, codes.Canceled},
		{"cancelled while the store failed", cancelled, storeErr, codes.Canceled},
		// core returns the deadline's error as soon as the deadline has
		// passed, which may be before the context's timer says so.
		{"deadline passed, the context not yet told", context.Background(), context.DeadlineExceeded, codes.DeadlineExceeded},
		{"the limiter's own deadline", context.Background(), &store.Error{Op: "update", Err: store.UnknownOutcome(context.DeadlineExceeded)}, codes.Unavailable},
	} {
		if got := status.Code(failure(tc.ctx, c, l, tc.err)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if !errors.Is(&core.InputError{Arg: "key"}, core.ErrInvalidInput) {
		t.Fatal("core.InputError no longer matches ErrInvalidInput: the Internal case above tests nothing")
	}
}
