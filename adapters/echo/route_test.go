package echo_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	sluiceecho "github.com/sluicehq/sluice/adapters/echo"
	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
	"github.com/sluicehq/sluice/adapters/nethttp"
)

// A request that matched no route for its method (405, echo's automatic
// OPTIONS, 404) reaches a middleware on e.Use with no route: keyed by
// route, it would otherwise make a key per made-up method for a request
// that serves nothing.
func TestNoRouteForTheMethodIsNoRoute(t *testing.T) {
	var seen []string
	p := nethttp.MustPolicy(nethttp.Config{
		Layers: []nethttp.Layer{{Limiter: adaptertest.Window(t, "route", 100, time.Minute), Key: nethttp.Route}},
		Skip:   func(q *nethttp.Request) bool { seen = append(seen, q.Route); return false },
	})
	e := echo.New()
	e.Use(sluiceecho.Middleware(p))
	e.GET("/items", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	for _, c := range []struct {
		method, path, route string
	}{
		{"GET", "/items", "/items"},
		{"FOO", "/items", ""},
		{"POST", "/items", ""},
		{"OPTIONS", "/items", ""},
		{"GET", "/nothing", ""},
	} {
		seen = seen[:0]
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		if len(seen) != 1 || seen[0] != c.route {
			t.Errorf("%s %s: the policy saw routes %q, want [%q]", c.method, c.path, seen, c.route)
		}
	}
}

// A group with middleware registers catch-all not-found routes ("/api" and
// "/api/*") so that its middleware runs for unknown paths under it, and
// an application may register not-found routes of its own: a request that
// reaches one matched no route. Keyed by route, every client's unknown
// paths would share the catch-all's key.
func TestNotFoundRouteIsNoRoute(t *testing.T) {
	var seen []string
	p := nethttp.MustPolicy(nethttp.Config{
		Layers: []nethttp.Layer{{Limiter: adaptertest.Window(t, "route", 100, time.Minute), Key: nethttp.Route}},
		Skip:   func(q *nethttp.Request) bool { seen = append(seen, q.Route); return false },
	})
	e := echo.New()
	g := e.Group("/api", sluiceecho.Middleware(p))
	g.GET("/items", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	g.GET("/files/*", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
	e.RouteNotFound("/app/*", func(c *echo.Context) error { return c.NoContent(http.StatusNotFound) }, sluiceecho.Middleware(p))
	for _, c := range []struct {
		method, path, route string
	}{
		{"GET", "/api/items", "/api/items"},
		{"GET", "/api/files/a/b", "/api/files/*"},
		{"GET", "/api/nope", ""},
		{"PUT", "/api/x", ""},
		{"GET", "/api", ""},
		{"GET", "/app/nope", ""},
	} {
		seen = seen[:0]
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		if len(seen) != 1 || seen[0] != c.route {
			t.Errorf("%s %s: the policy saw routes %q, want [%q]", c.method, c.path, seen, c.route)
		}
	}
}
