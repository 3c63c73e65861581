package nethttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A fixed window of two requests a minute per client address, on a
// manual clock so that the output is always the same: 45 seconds into a
// minute, the window resets in 15.
func ExampleMiddleware() {
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 45, 0, time.UTC))
	store := memory.New(&memory.Options{Clock: clock})
	defer store.Close()
	perIP, err := core.New(core.Config{
		Policy:    core.PerMinute("per-ip", 2),
		Algorithm: algorithm.FixedWindow{},
		Store:     store,
		Clock:     clock,
	})
	if err != nil {
		panic(err)
	}
	policy, err := nethttp.NewPolicy(nethttp.Config{
		Layers:    []nethttp.Layer{{Limiter: perIP}},
		SkipPaths: []string{"/healthz"},
	})
	if err != nil {
		panic(err)
	}
	limit := nethttp.Middleware(policy)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux := http.NewServeMux()
	mux.Handle("GET /api", limit(hello))
	mux.Handle("GET /healthz", limit(hello))

	for _, path := range []string{"/api", "/api", "/api", "/healthz"} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		h := w.Header()
		fmt.Println(path, w.Code, h.Values("RateLimit"))
		if w.Code == http.StatusTooManyRequests {
			fmt.Println("Retry-After:", h.Get("Retry-After"))
			fmt.Println("RateLimit-Policy:", h.Get("RateLimit-Policy"))
			fmt.Println("Content-Type:", h.Get("Content-Type"))
			fmt.Println(w.Body)
		}
	}
	// Output:
	// /api 200 ["per-ip";r=1;t=15]
	// /api 200 ["per-ip";r=0;t=15]
	// /api 429 ["per-ip";r=0;t=15]
	// Retry-After: 15
	// RateLimit-Policy: "per-ip";q=2;w=60
	// Content-Type: application/problem+json
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"violated-policies":["per-ip"]}
	// /healthz 200 []
}

type authUser struct{}

// Two layers: a coarse limit per client address, then a limit per user
// that the application's authentication stored in the request's context.
// Behind a trusted proxy, the client address comes from X-Forwarded-For.
func ExampleNewPolicy_layers() {
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	store := memory.New(&memory.Options{Clock: clock})
	defer store.Close()
	newLimiter := func(p core.Policy) *core.Limiter {
		l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: store, Clock: clock})
		if err != nil {
			panic(err)
		}
		return l
	}
	policy, err := nethttp.NewPolicy(nethttp.Config{
		Layers: []nethttp.Layer{
			{Limiter: newLimiter(core.PerMinute("per-ip", 100))},
			{Limiter: newLimiter(core.PerMinute("per-user", 1)), Key: nethttp.Identity(authUser{})},
		},
		TrustedProxies: []string{"10.0.0.0/8"},
	})
	if err != nil {
		panic(err)
	}
	authenticate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The application's own authentication goes here.
			if u := r.Header.Get("Authorization"); u != "" {
				r = r.WithContext(context.WithValue(r.Context(), authUser{}, u))
			}
			next.ServeHTTP(w, r)
		})
	}
	h := authenticate(nethttp.Middleware(policy)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))

	for _, user := range []string{"alice", "alice", "bob"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:40000" // the proxy
		r.Header.Set("X-Forwarded-For", "203.0.113.7")
		r.Header.Set("Authorization", user)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(user, w.Code, w.Header().Get("RateLimit"))
	}
	// alice's second request is refused by per-user, and its unit at
	// per-ip is refunded.

	// Output:
	// alice 200 "per-ip";r=99;t=1, "per-user";r=0;t=60
	// alice 429 "per-ip";r=99;t=2, "per-user";r=0;t=60
	// bob 200 "per-ip";r=98;t=2, "per-user";r=0;t=60
}
