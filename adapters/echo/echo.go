package echo

import (
	"github.com/labstack/echo/v5"

	"github.com/sluicehq/sluice/adapters/nethttp"
)

// Middleware returns an echo (v5) middleware that applies p: it hands the
// request to p.Admit with the route's Path and the context's values, and
// when p refused the request (p has written the 429 or 503) returns nil
// without calling next; otherwise it calls next, releasing concurrency
// leases when next returns or panics.
func Middleware(p *nethttp.Policy) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			a, ok := p.Admit(c.Response(), c.Request(), route(c), values{c})
			if !ok {
				return nil
			}
			defer a.Done()
			return next(c)
		}
	}
}

// route is the route c matched, or "" when the router found none for its
// method (a 405, the automatic OPTIONS reply, a 404), for which echo still
// sets a path: keyed by route, each made-up method would make a key of its
// own for a request that serves nothing. A not-found route (RouteNotFound:
// the catch-alls a Group with middleware registers, "/api" and "/api/*",
// or an application's own) is no route either: keyed by its path, every
// client's unknown paths under it would share one key.
func route(c *echo.Context) string {
	ri := c.RouteInfo()
	switch {
	case ri.Method == echo.RouteNotFound:
		return ""
	case ri.Name == echo.MethodNotAllowedRouteName, ri.Name == echo.NotFoundRouteName:
		return ""
	}
	return c.Path()
}

// New is nethttp.NewPolicy followed by Middleware.
func New(cfg nethttp.Config) (echo.MiddlewareFunc, error) {
	p, err := nethttp.NewPolicy(cfg)
	if err != nil {
		return nil, err
	}
	return Middleware(p), nil
}

// values looks a string key up in the echo context's store (c.Set), then
// any key in the request's context. One pointer wide: no allocation.
type values struct{ c *echo.Context }

func (v values) Value(key any) any {
	if k, ok := key.(string); ok {
		if val := v.c.Get(k); val != nil {
			return val
		}
	}
	return v.c.Request().Context().Value(key)
}
