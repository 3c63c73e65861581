package gin_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"
	sluicegin "github.com/sluicehq/sluice/adapters/gin"
	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// harness mounts routes on a bare gin engine (no Recovery: a panic must go
// up through the middleware): authenticate with c.Set, then limit, then
// the handler.
var harness = adaptertest.Harness{
	UserKey: "user",
	Mount: func(t *testing.T, routes []adaptertest.Route) http.Handler {
		e := gin.New()
		for _, rt := range routes {
			chain := []gin.HandlerFunc{authenticate}
			if rt.Policy != nil {
				chain = append(chain, sluicegin.Middleware(rt.Policy))
			}
			chain = append(chain, gin.WrapF(rt.Handler))
			e.Handle(rt.Method, rt.Path, chain...)
		}
		return e
	},
}

func authenticate(c *gin.Context) {
	if u := c.GetHeader(adaptertest.UserHeader); u != "" {
		c.Set("user", u)
	}
}

func TestAdapter(t *testing.T) { adaptertest.Run(t, harness) }
