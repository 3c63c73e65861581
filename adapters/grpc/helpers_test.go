package sluicegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// epoch is a whole minute, so that fixed windows start on it.
var epoch = time.Unix(1_800_000_000, 0)

// service is the grpc-go interop TestService: UnaryCall answers at once,
// FullDuplexCall echoes every message until the client closes its side.
// It counts the handlers that ran.
type service struct {
	testpb.UnimplementedTestServiceServer
	unaryRuns  atomic.Int64
	streamRuns atomic.Int64
	// onUnary, when set, runs inside UnaryCall (a panic, a record).
	onUnary func(ctx context.Context, req *testpb.SimpleRequest)
}

func (s *service) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.unaryRuns.Add(1)
	if s.onUnary != nil {
		s.onUnary(ctx, req)
	}
	return &testpb.SimpleResponse{}, nil
}

func (s *service) FullDuplexCall(st grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	s.streamRuns.Add(1)
	for {
		if _, err := st.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := st.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
}

// serve starts a real grpc.Server with the given options on a loopback TCP
// port and returns a client connected to it over TCP, insecure.
func serve(t *testing.T, svc *service, opts ...grpc.ServerOption) testpb.TestServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(srv, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		srv.Stop()
		<-done
	})
	return testpb.NewTestServiceClient(cc)
}

// servePolicy serves p with both interceptors.
func servePolicy(t *testing.T, svc *service, p *sluicegrpc.Policy) testpb.TestServiceClient {
	t.Helper()
	return serve(t, svc,
		grpc.ChainUnaryInterceptor(sluicegrpc.UnaryServerInterceptor(p)),
		grpc.ChainStreamInterceptor(sluicegrpc.StreamServerInterceptor(p)))
}

// memStore is a memory store on clk, closed with the test.
func memStore(t *testing.T, clk core.Clock) *memory.Store {
	t.Helper()
	st := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newLimiter(t *testing.T, cfg core.Config) *core.Limiter {
	t.Helper()
	lim, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// reply is what a client saw of one call.
type reply struct {
	err     error
	header  metadata.MD
	trailer metadata.MD
}

func (r reply) code() codes.Code { return status.Code(r.err) }

// retryInfo returns the call's RetryInfo delay; ok is false without one.
func (r reply) retryInfo() (time.Duration, bool) {
	for _, d := range status.Convert(r.err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// violated returns the subjects of the call's QuotaFailure.
func (r reply) violated() []string {
	var s []string
	for _, d := range status.Convert(r.err).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.GetViolations() {
				s = append(s, v.GetSubject())
			}
		}
	}
	return s
}

func one(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func callCtx(t *testing.T, md ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	return ctx
}

// unary makes one UnaryCall and returns what the client saw.
func unary(t *testing.T, c testpb.TestServiceClient, ctx context.Context, req *testpb.SimpleRequest) reply {
	t.Helper()
	var r reply
	if req == nil {
		req = &testpb.SimpleRequest{}
	}
	_, r.err = c.UnaryCall(ctx, req, grpc.Header(&r.header), grpc.Trailer(&r.trailer))
	return r
}

// stream is an open FullDuplexCall.
type stream struct {
	s      grpc.BidiStreamingClient[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]
	cancel context.CancelFunc
}

// open opens a FullDuplexCall and exchanges one message, which shows
// whether the stream was admitted: a refused stream ends with its status
// on that first Recv. An admitted stream stays open until close.
func open(t *testing.T, c testpb.TestServiceClient, md ...string) (*stream, reply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var r reply
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		cancel()
		r.err = err
		return nil, r
	}
	_ = s.Send(&testpb.StreamingOutputCallRequest{}) // io.EOF when refused: the status is on Recv
	if _, r.err = s.Recv(); r.err != nil {
		r.header, _ = s.Header()
		r.trailer = s.Trailer()
		cancel()
		return nil, r
	}
	r.header, _ = s.Header()
	st := &stream{s: s, cancel: cancel}
	t.Cleanup(st.cancel)
	return st, r
}

// close ends the stream as a client does, and waits until the server's
// handler has returned: Recv sees io.EOF only after the server's status.
func (s *stream) close(t *testing.T) {
	t.Helper()
	if err := s.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv after CloseSend: %v, want io.EOF", err)
	}
	s.cancel()
}

// item formats the ratelimit item a decision must produce.
func item(name string, d core.Decision) string {
	return fmt.Sprintf("%q;r=%d;t=%d", name, max(d.Remaining, 0), ceilSeconds(d.ResetAfter))
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// failingStore is a store that can never decide.
type failingStore struct{ calls atomic.Int64 }

func (f *failingStore) Update(context.Context, store.Key, store.Mutation) error {
	f.calls.Add(1)
	return &store.Error{Op: "update", Err: errors.New("connection refused")}
}
