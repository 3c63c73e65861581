package nethttp_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
	"github.com/sluicehq/sluice/adapters/nethttp"
)

// BenchmarkBare is a ServeMux with the no-op handler: the baseline.
func BenchmarkBare(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /api", adaptertest.Noop)
	adaptertest.Bench(b, mux, "/api")
}

// BenchmarkMiddleware is BenchmarkBare with the middleware in front of
// the handler: the difference is the middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	mux := http.NewServeMux()
	mux.Handle("GET /api", nethttp.Middleware(adaptertest.BenchPolicy(b))(adaptertest.Noop))
	adaptertest.Bench(b, mux, "/api")
}
