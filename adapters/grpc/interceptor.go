package sluicegrpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor returns a unary server interceptor that applies p
// to every call before its handler. A refused call never reaches the
// handler; an admitted one holds its concurrency leases until the handler
// returns, and also when it panics (the panic then goes on up the stack,
// to a recovery interceptor chained before this one, if any).
//
// Chain it after the interceptors whose results its KeyFuncs read (an
// authentication interceptor that stores the caller's identity):
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(auth, sluicegrpc.UnaryServerInterceptor(p)))
func UnaryServerInterceptor(p *Policy) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		a, err := p.decide(ctx, info.FullMethod, req, false, false, unarySink{ctx})
		if err != nil {
			return nil, err
		}
		defer a.done()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns a stream server interceptor that applies
// p to every stream when it opens, before its handler: a stream is one
// call, charged once however many messages it carries. A concurrency lease
// is held for the whole stream and released when the handler returns (or
// panics), that is when the stream ends.
func StreamServerInterceptor(p *Policy) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		a, err := p.decide(ss.Context(), info.FullMethod, nil, info.IsClientStream, info.IsServerStream, ss)
		if err != nil {
			return err
		}
		defer a.done()
		return handler(srv, ss)
	}
}

// decide applies the skip rules, then admit. A skipped call gets a nil
// admission and no fields.
func (p *Policy) decide(ctx context.Context, method string, req any, cs, ss bool, out fieldSink) (*admission, error) {
	if p == nil || p.layers == nil {
		// Refuse rather than serve with no limit, or panic in every call.
		return nil, status.Errorf(codes.Internal, "sluicegrpc: %s: the server's rate limit is not configured: its Policy was not made by NewPolicy", method)
	}
	if p.skipMethod(method) {
		return nil, nil
	}
	c := p.newCall(ctx, method, req, cs, ss)
	defer freeCall(c)
	if p.skip != nil && p.skip(c) {
		return nil, nil
	}
	return p.admit(ctx, c, out)
}

// unarySink sets the fields of a unary call through its context.
type unarySink struct{ ctx context.Context }

func (u unarySink) SetHeader(md metadata.MD) error { return grpc.SetHeader(u.ctx, md) }
func (u unarySink) SetTrailer(md metadata.MD)      { _ = grpc.SetTrailer(u.ctx, md) }
