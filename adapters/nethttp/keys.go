package nethttp

import (
	"fmt"
	"net/http"
	"strconv"
)

// Identity keys requests by the authenticated identity the application
// stored under key after its own authentication (for net/http, in the
// request's context: context.WithValue; for gin, with c.Set; for echo, with
// c.Set). The value may be a string, a []byte, a fmt.Stringer, or any
// integer type. A request without one (not authenticated) is keyed by its client
// address instead, under the same policy.
func Identity(key any) KeyFunc {
	return func(q *Request) string {
		switch v := q.Value(key).(type) {
		case string:
			return v
		case []byte:
			return string(v)
		case int:
			return strconv.Itoa(v)
		case int8:
			return strconv.FormatInt(int64(v), 10)
		case int16:
			return strconv.FormatInt(int64(v), 10)
		case int32:
			return strconv.FormatInt(int64(v), 10)
		case int64:
			return strconv.FormatInt(v, 10)
		case uint:
			return strconv.FormatUint(uint64(v), 10)
		case uint8:
			return strconv.FormatUint(uint64(v), 10)
		case uint16:
			return strconv.FormatUint(uint64(v), 10)
		case uint32:
			return strconv.FormatUint(uint64(v), 10)
		case uint64:
			return strconv.FormatUint(v, 10)
		case fmt.Stringer:
			return v.String()
		}
		return ""
	}
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
