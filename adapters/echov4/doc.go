// Package echov4 applies a Sluice HTTP policy (nethttp.Policy) to an echo v4
// application (github.com/labstack/echo/v4, whose handlers take an
// echo.Context interface). Package echo is the same door for echo v5; the
// two differ only in the handler signature. It is a thin door: the policy —
// identity, layers, costs, skip paths, the RateLimit fields, the 429 and
// 503 problem bodies — lives in package nethttp and is the same for every
// framework.
//
// The route a request matched is echo's Path ("/items/:id"), and
// nethttp.Identity reads string keys the application set with c.Set (then
// the request's context):
//
//	e := echo.New()
//	api := e.Group("/api", authenticate, echov4.Middleware(policy))
//	api.POST("/upload", upload, echov4.Middleware(uploadPolicy))
//
// A policy on a group and another on a route stack: both are checked, and
// the response lists the RateLimit items of both. Stacked policies are
// independent: a refusal by the route's does not refund the group's
// layers, and its Retry-After does not wait for them. Layers that must
// (a per-IP layer before a per-user one, so that one user's refusals do
// not spend the address's quota) belong in one policy's Layers.
//
// Use it with e.Use or on groups and routes, not with e.Pre: before
// routing, the route is unknown.
//
// A request that reaches a not-found route (the catch-alls "/api" and
// "/api/*" that a Group with middleware registers, or e.RouteNotFound) has
// no route: nethttp.Route keys it by its client. echo v4 does not say
// which kind of route matched, so the middleware keeps a table of the
// routes of the router that served the request, found by the request's
// Host as echo finds it (e.Host routers). An e.Pre middleware that
// changes the request's Host makes echo route by the Host it had before,
// and the middleware read the table of the new one: with e.Host routers
// whose routes differ at one path, such a request can be keyed by client
// where it matched a route, or by route where it matched none. Package
// echo (v5) names the matched route and has no such case. A refused request is answered by the
// policy and the middleware returns nil, so echo's error handler does not
// write a second response.
package echov4
