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

// Route keys requests by their method and route pattern: one quota for
// everyone on that route (a global limit on an expensive endpoint). A
// request that matched no route is keyed by its client address.
func Route(q *Request) string {
	if q.Route == "" {
		return ""
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
