package echov4_test

import (
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/adapters/echov4"
	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
)

func noop(c echo.Context) error { return nil }

// BenchmarkBare is an echo v4 instance with a no-op handler: the baseline.
func BenchmarkBare(b *testing.B) {
	e := echo.New()
	e.GET("/api", noop)
	adaptertest.Bench(b, e, "/api")
}

// BenchmarkMiddleware is BenchmarkBare with the middleware in front of
// the handler: the difference is the middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	e := echo.New()
	e.GET("/api", noop, echov4.Middleware(adaptertest.BenchPolicy(b)))
	adaptertest.Bench(b, e, "/api")
}
