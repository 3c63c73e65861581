package nethttp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
	"github.com/sluicehq/sluice/adapters/nethttp"
)

type userKey struct{}

// harness mounts routes on a ServeMux, each wrapped inside the mux so that
// Request.Pattern is set: authenticate, then limit, then the handler.
var harness = adaptertest.Harness{
	UserKey: userKey{},
	Mount: func(t *testing.T, routes []adaptertest.Route) http.Handler {
		mux := http.NewServeMux()
		for _, rt := range routes {
			var h http.Handler = rt.Handler
			if rt.Policy != nil {
				h = nethttp.Middleware(rt.Policy)(h)
			}
			mux.Handle(rt.Method+" "+muxPath(rt.Path), authenticate(h))
		}
		return mux
	},
}

// muxPath turns "/items/:id" into "/items/{id}".
func muxPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get(adaptertest.UserHeader); u != "" {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

func TestAdapter(t *testing.T) { adaptertest.Run(t, harness) }
