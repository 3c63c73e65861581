package gin_test

import (
	"testing"

	"github.com/gin-gonic/gin"
	sluicegin "github.com/sluicehq/sluice/adapters/gin"
	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
)

func noop(c *gin.Context) {}

// BenchmarkBare is a gin engine with a no-op handler: the baseline.
func BenchmarkBare(b *testing.B) {
	e := gin.New()
	e.GET("/api", noop)
	adaptertest.Bench(b, e, "/api")
}

// BenchmarkMiddleware is BenchmarkBare with the middleware in front of
// the handler: the difference is the middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	e := gin.New()
	e.GET("/api", sluicegin.Middleware(adaptertest.BenchPolicy(b)), noop)
	adaptertest.Bench(b, e, "/api")
}
