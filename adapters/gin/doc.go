// Package gin applies a Sluice HTTP policy (nethttp.Policy) to a gin
// application. It is a thin door: the policy — identity, layers, costs,
// skip paths, the RateLimit fields, the 429 and 503 problem bodies — lives
// in package nethttp and is the same for every framework.
//
// The route a request matched is gin's FullPath ("/items/:id"), and
// nethttp.Identity reads keys the application set with c.Set (then the
// request's context), so an authentication middleware placed before this
// one can key limits by user:
//
//	r := gin.New()
//	api := r.Group("/api", authenticate, sluicegin.Middleware(policy))
//	api.POST("/upload", sluicegin.Middleware(uploadPolicy), upload)
//
// A policy on a group and another on a route stack: both are checked, and
// the response lists the RateLimit items of both. Stacked policies are
// independent: a refusal by the route's does not refund the group's
// layers, and its Retry-After does not wait for them. Layers that must
// (a per-IP layer before a per-user one, so that one user's refusals do
// not spend the address's quota) belong in one policy's Layers.
//
// The package is named gin, like the framework; import it under another
// name (sluicegin).
package gin
