package echov4_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/adapters/echov4"
	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
)

// harness mounts routes on a bare echo v4 instance (no Recover middleware:
// a panic must go up through the middleware): authenticate with c.Set,
// then limit, then the handler.
var harness = adaptertest.Harness{
	UserKey: "user",
	Mount: func(t *testing.T, routes []adaptertest.Route) http.Handler {
		e := echo.New()
		e.HideBanner, e.HidePort = true, true
		for _, rt := range routes {
			mws := []echo.MiddlewareFunc{authenticate}
			if rt.Policy != nil {
				mws = append(mws, echov4.Middleware(rt.Policy))
			}
			e.Add(rt.Method, rt.Path, echo.WrapHandler(rt.Handler), mws...)
		}
		return e
	},
}

func authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if u := c.Request().Header.Get(adaptertest.UserHeader); u != "" {
			c.Set("user", u)
		}
		return next(c)
	}
}

func TestAdapter(t *testing.T) { adaptertest.Run(t, harness) }
