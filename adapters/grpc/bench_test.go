package sluicegrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// nopTransport is the server stream grpc.SetHeader writes to, minus the
// network.
type nopTransport struct{}

func (nopTransport) Method() string                  { return "/bench.S/M" }
func (nopTransport) SetHeader(metadata.MD) error     { return nil }
func (nopTransport) SendHeader(metadata.MD) error    { return nil }
func (nopTransport) SetTrailer(md metadata.MD) error { return nil }

// BenchmarkUnaryInterceptor is the interceptor's cost per admitted call
// over a handler that does nothing: one GCRA layer on the memory store,
// keyed by the peer address, without the network.
func BenchmarkUnaryInterceptor(b *testing.B) {
	st := memory.New(nil)
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "bench", Limit: 1_000_000_000, Window: time.Hour}, Algorithm: algorithm.GCRA{}, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ic := sluicegrpc.UnaryServerInterceptor(sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}}))
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), nopTransport{})
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}})
	info := &grpc.UnaryServerInfo{FullMethod: "/bench.S/M"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ic(ctx, nil, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := ic(ctx, nil, info, handler); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
