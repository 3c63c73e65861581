// Package echo applies a Sluice HTTP policy (nethttp.Policy) to an echo v5
// application (github.com/labstack/echo/v5, whose handlers take an
// *echo.Context). Package echov4 is the same door for echo v4. It is a thin
// door: the policy — identity, layers, costs, skip paths, the RateLimit
// fields, the 429 and 503 problem bodies — lives in package nethttp and is
// the same for every framework.
//
// The route a request matched is echo's Path ("/items/:id"), and
// nethttp.Identity reads string keys the application set with c.Set (then
// the request's context), so an authentication middleware placed before
// this one can key limits by user:
//
//	e := echo.New()
//	api := e.Group("/api", authenticate, sluiceecho.Middleware(policy))
//	api.POST("/upload", upload, sluiceecho.Middleware(uploadPolicy))
//
// A policy on a group and another on a route stack: both are checked, and
// the response lists the RateLimit items of both. Stacked policies are
// independent: a refusal by the route's does not refund the group's
// layers, and its Retry-After does not wait for them. Layers that must
// (a per-IP layer before a per-user one, so that one user's refusals do
// not spend the address's quota) belong in one policy's Layers.
//
// Use it with e.Use or on groups and routes, not with e.Pre: before
// routing, the route is unknown. A refused request is answered by the
// policy and the middleware returns nil, so echo's error handler does not
// write a second response.
//
// The package is named echo, like the framework; import it under another
// name (sluiceecho).
package echo
