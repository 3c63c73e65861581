package echov4_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	sluiceecho "github.com/sluicehq/sluice/adapters/echov4"
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
	e.GET("/items", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
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
// paths would share the catch-all's key. Routes added after the first
// request are known too.
func TestNotFoundRouteIsNoRoute(t *testing.T) {
	var seen []string
	p := nethttp.MustPolicy(nethttp.Config{
		Layers: []nethttp.Layer{{Limiter: adaptertest.Window(t, "route", 100, time.Minute), Key: nethttp.Route}},
		Skip:   func(q *nethttp.Request) bool { seen = append(seen, q.Route); return false },
	})
	mw := sluiceecho.Middleware(p)
	ok := func(c echo.Context) error { return c.NoContent(http.StatusOK) }
	e := echo.New()
	g := e.Group("/api", mw)
	g.GET("/items", ok)
	g.GET("/files/*", ok)
	e.RouteNotFound("/app/*", func(c echo.Context) error { return c.NoContent(http.StatusNotFound) }, mw)
	check := func(method, path, route string) {
		t.Helper()
		seen = seen[:0]
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
		if len(seen) != 1 || seen[0] != route {
			t.Errorf("%s %s: the policy saw routes %q, want [%q]", method, path, seen, route)
		}
	}
	check("GET", "/api/items", "/api/items")
	check("GET", "/api/files/a/b", "/api/files/*")
	check("GET", "/api/nope", "")
	check("PUT", "/api/x", "")
	check("GET", "/api", "")
	check("GET", "/app/nope", "")
	// Served before, a not-found path, then a route there.
	g.GET("", ok)
	g.PUT("/*", ok)
	check("GET", "/api", "/api")
	check("PUT", "/api/x", "/api/*")
	check("GET", "/api/nope", "")
	// Another Echo behind the same middleware has routes of its own.
	e2 := echo.New()
	e2.Group("/api", mw).GET("/*", ok)
	seen = seen[:0]
	e2.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/nope", nil))
	if len(seen) != 1 || seen[0] != "/api/*" {
		t.Errorf("second Echo, GET /api/nope: the policy saw routes %q, want [\"/api/*\"]", seen)
	}
	check("GET", "/api/nope", "")

	// A host's router has routes of its own: a route on one does not make
	// the other's not-found route a route.
	e.Host("other.example").GET("/api/*", ok)
	check("GET", "/api/nope2", "")
	h2 := e.Host("h2.example", mw)
	h2.GET("/known", ok)
	e.Host("h3.example", mw).RouteNotFound("/only/*", func(c echo.Context) error { return c.NoContent(http.StatusNotFound) })
	e.GET("/only/*", ok, mw)
	check("GET", "/only/x", "/only/*")
	for _, c := range []struct{ url, route string }{
		{"http://h2.example/known", "/known"},
		{"http://h2.example/nope", ""},
		{"http://h3.example/only/x", ""},
		{"http://other.example/api/x", ""}, // no middleware on that host's route
	} {
		seen = seen[:0]
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", c.url, nil))
		want := []string{c.route}
		if c.url == "http://other.example/api/x" {
			want = nil
		}
		if fmt.Sprintf("%q", seen) != fmt.Sprintf("%q", want) {
			t.Errorf("GET %s: the policy saw routes %q, want %q", c.url, seen, want)
		}
	}
}
