module github.com/sluicehq/sluice/adapters/grpc

go 1.26.8

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

// The root module of this repository; released together with this one.
replace github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000 => ../..
