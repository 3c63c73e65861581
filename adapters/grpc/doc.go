// Package grpc holds gRPC server interceptors that enforce Sluice limits.
package grpc
