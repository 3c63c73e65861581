package nethttp

import (
	"net/http"

	"github.com/sluicehq/sluice/adapters/internal/identity"
)

// Identity keys requests by the authenticated identity the application
// stored under key after its own authentication (for net/http, in the
// request's context: context.WithValue; for gin, with c.Set; for echo, with
// c.Set). The value may be a string, a []byte, a fmt.Stringer, or any
// integer type, a type of the application's own included (type UserID
// string). A request without one (not authenticated) is keyed by its client
// address instead, under the same policy.
func Identity(key any) KeyFunc {
	return func(q *Request) string { return identity.Of(q.Value(key)) }
}

// Route keys requests by the route they matched: one quota for everyone on
// that route (a global limit on an expensive endpoint), whatever the method
// that reached it. For net/http's Middleware the route is the ServeMux
// pattern, which names its method when it has one: a pattern without a
// method serves every method, and counts them all in its one quota (a
// made-up method is no fresh quota), and "GET /x" counts the HEAD requests
// it serves too. gin and echo register a route per method, so there the key
// is the method and the path (a route registered with Any counts each of its
// methods apart). A request that matched no route is keyed by its client
// address.
func Route(q *Request) string {
	if q.Route == "" {
		return ""
	}
	if q.mux {
		return q.Route // a ServeMux pattern: its method, or every method
	}
	return q.Method + " " + q.Route
}

// Header keys requests by the value of the named request header, as sent.
// The client chooses that value: use it only for a header that something
// before this middleware has validated (an API gateway that checks API
// keys), never to identify clients on its own. A request without the
// header is keyed by its client address.
func Header(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(q *Request) string {
		if v := q.Header[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// KeyIdentity returns the identity under which a layer counts the requests
// its KeyFunc gives key: key set apart from client addresses, so that no
// key can collide with the address another request falls back to. Use it to
// Reset a key, or to read its state, through the layer's Limiter:
//
//	err := lim.Reset(ctx, KeyIdentity(userID))
func KeyIdentity(key string) string { return "k:" + key }
