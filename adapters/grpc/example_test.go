package sluicegrpc_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A server that admits one call per client address per hour (the health
// service stands in for an application's own), and a client that reads
// what a refusal tells it.
func Example() {
	store := memory.New(nil)
	defer store.Close()
	perIP, err := core.New(core.Config{
		Policy:    core.Policy{Name: "per-ip", Limit: 1, Window: time.Hour},
		Algorithm: algorithm.GCRA{},
		Store:     store,
	})
	if err != nil {
		log.Fatal(err)
	}
	policy, err := sluicegrpc.NewPolicy(sluicegrpc.Config{
		Layers: []sluicegrpc.Layer{{Limiter: perIP}},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(sluicegrpc.UnaryServerInterceptor(policy)),
		grpc.ChainStreamInterceptor(sluicegrpc.StreamServerInterceptor(policy)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	for range 2 {
		var header metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		st := status.Convert(err)
		fmt.Println(st.Code(), header.Get("ratelimit"), header.Get("ratelimit-policy"))
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println("retry in about", ri.GetRetryDelay().AsDuration().Round(time.Minute), "retry-after:", header.Get("retry-after"))
			}
		}
	}
	// Output:
	// OK ["per-ip";r=0;t=3600] ["per-ip";q=1;w=3600]
	// ResourceExhausted ["per-ip";r=0;t=3600] ["per-ip";q=1;w=3600]
	// retry in about 1h0m0s retry-after: [3600]
}
