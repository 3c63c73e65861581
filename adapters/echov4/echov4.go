package echov4

import (
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/adapters/nethttp"
)

// Middleware returns an echo v4 middleware that applies p: it hands the
// request to p.Admit with the route's Path and the context's values, and
// when p refused the request (p has written the 429 or 503) returns nil
// without calling next; otherwise it calls next, releasing concurrency
// leases when next returns or panics.
func Middleware(p *nethttp.Policy) echo.MiddlewareFunc {
	// One pointer for the closures to hold: echo applies a route's
	// middleware for each request, and each word they capture is a
	// request's allocation.
	rc := &routeCache{p: p}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			a, ok := rc.p.Admit(c.Response(), c.Request(), rc.route(c), values{c})
			if !ok {
				return nil
			}
			defer a.Done()
			return next(c)
		}
	}
}

// route is the route c matched, or "" when the router found none for its
// method (a 405, the automatic OPTIONS reply), for which echo still sets a
// path: keyed by route, each made-up method would make a key of its own
// for a request that serves nothing. The router marks that case with the
// Allow header's methods in the context. A not-found route (RouteNotFound:
// the catch-alls a Group with middleware registers, "/api" and "/api/*",
// or an application's own) is no route either: keyed by its path, every
// client's unknown paths under it would share one key. echo v4 does not
// say which kind of route matched, so the middleware keeps a table of the
// routes of the router that served the request (routeTable): the Echo's,
// or its e.Host router for the request's host.
func (rc *routeCache) route(c echo.Context) string {
	if c.Get(echo.ContextKeyHeaderAllow) != nil {
		return ""
	}
	path := c.Path()
	if path == "" {
		return ""
	}
	e := c.Echo()
	if e == nil {
		return path
	}
	req := c.Request()
	router := e.Router()
	if hosts := e.Routers(); len(hosts) > 0 {
		if r, ok := hosts[req.Host]; ok { // the router echo chose (Echo.ServeHTTP)
			router = r
		}
	}
	mp := methodPath{req.Method, path}
	t := rc.table(router)
	if t == nil || !t.served[mp] {
		// A not-found route's path, or one the table does not know: the
		// routes may have changed since the table was made. echo has no
		// cheaper sign of it than their number, which costs a slice of
		// them: only a request that serves nothing pays it.
		routes := router.Routes()
		if t == nil || len(routes) != t.count {
			t = rc.rebuild(router, routes)
		}
	}
	// A route that serves the method at the path is the one the router
	// chose: it prefers it to a not-found route of the same path.
	if t.notFound[path] && !t.served[mp] {
		return ""
	}
	return path
}

// methodPath is a route's method and path.
type methodPath struct{ method, path string }

// routeTable is what a middleware knows of one router's routes: the method
// and path of each route that serves, and the paths of the not-found
// routes.
type routeTable struct {
	served   map[methodPath]bool
	notFound map[string]bool
	count    int // the routes it was made of
}

// routeCache holds the route tables of the routers a middleware has
// served, at most maxTables of them (an application has one, or one a
// host; tests make many Echos, which must not be kept alive for ever).
// Read without a lock.
type routeCache struct {
	p      *nethttp.Policy // the middleware's
	mu     sync.Mutex
	tables atomic.Pointer[map[*echo.Router]*routeTable] // never changed once stored
}

const maxTables = 64

func (rc *routeCache) table(r *echo.Router) *routeTable {
	if m := rc.tables.Load(); m != nil {
		return (*m)[r]
	}
	return nil
}

// rebuild makes r's table anew from its routes.
func (rc *routeCache) rebuild(r *echo.Router, routes []*echo.Route) *routeTable {
	t := &routeTable{served: map[methodPath]bool{}, notFound: map[string]bool{}, count: len(routes)}
	for _, rt := range routes {
		if rt.Method == echo.RouteNotFound {
			t.notFound[rt.Path] = true
		} else {
			t.served[methodPath{rt.Method, rt.Path}] = true
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	next := make(map[*echo.Router]*routeTable, maxTables)
	if m := rc.tables.Load(); m != nil && len(*m) < maxTables {
		for k, v := range *m {
			next[k] = v
		}
	}
	next[r] = t
	rc.tables.Store(&next)
	return t
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
// any key in the request's context.
type values struct{ c echo.Context }

func (v values) Value(key any) any {
	if k, ok := key.(string); ok {
		if val := v.c.Get(k); val != nil {
			return val
		}
	}
	return v.c.Request().Context().Value(key)
}
