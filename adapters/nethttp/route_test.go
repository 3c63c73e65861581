package nethttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Route is one quota for everyone on a route: a ServeMux pattern without a
// method serves every method, so every method counts in its one quota (a
// made-up method is no fresh quota), and "GET /get" counts the HEAD
// requests it serves as well.
func TestRouteKeyIsOneQuotaForEveryMethodThePatternServes(t *testing.T) {
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: testLimiter(t, "route", 2, time.Minute), Key: Route}}})
	ran := 0
	h := Middleware(p)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }))
	mux := http.NewServeMux()
	mux.Handle("/expensive", h)
	mux.Handle("GET /get", h)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/expensive", http.StatusOK},
		{"POST", "/expensive", http.StatusOK},
		{"GET", "/expensive", http.StatusTooManyRequests},
		{"POST", "/expensive", http.StatusTooManyRequests},
		{"FOO", "/expensive", http.StatusTooManyRequests},
		{"FOO1", "/expensive", http.StatusTooManyRequests},
		{"GET", "/get", http.StatusOK},
		{"HEAD", "/get", http.StatusOK},
		{"HEAD", "/get", http.StatusTooManyRequests},
		{"GET", "/get", http.StatusTooManyRequests},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		if w.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, w.Code, c.want)
		}
	}
	if ran != 4 {
		t.Errorf("the handlers ran %d times under two quotas of 2", ran)
	}
}
