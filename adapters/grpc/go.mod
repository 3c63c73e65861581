module github.com/sluicehq/sluice/adapters/grpc

go 1.26.8

require github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000

// The root module of this repository; released together with this one.
replace github.com/sluicehq/sluice v0.0.0-00010101000000-000000000000 => ../..
