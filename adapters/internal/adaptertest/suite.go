package adaptertest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// Run runs the adapter behaviour suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("AdmitsThenRefuses", func(t *testing.T) { testAdmitsThenRefuses(t, h) })
	t.Run("SkipPaths", func(t *testing.T) { testSkipPaths(t, h) })
	t.Run("ForwardingHeaders", func(t *testing.T) { testForwardingHeaders(t, h) })
	t.Run("Identity", func(t *testing.T) { testIdentity(t, h) })
	t.Run("RouteKey", func(t *testing.T) { testRouteKey(t, h) })
	t.Run("Cost", func(t *testing.T) { testCost(t, h) })
	t.Run("Layers", func(t *testing.T) { testLayers(t, h) })
	t.Run("LayeredRetryAfter", func(t *testing.T) { testLayeredRetryAfter(t, h) })
	t.Run("FailClosed", func(t *testing.T) { testFailClosed(t, h) })
	t.Run("FailOpen", func(t *testing.T) { testFailOpen(t, h) })
	t.Run("ConcurrencyLease", func(t *testing.T) { testConcurrencyLease(t, h) })
	t.Run("LeakyBucketDelay", func(t *testing.T) { testLeakyBucketDelay(t, h) })
}

// counted is a handler that counts its calls and answers 200 "ok".
func counted(n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = w.Write([]byte("ok"))
	}
}

func testAdmitsThenRefuses(t *testing.T, h Harness) {
	var calls atomic.Int64
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{Limiter: Window(t, "api", 3, time.Minute)}}})
	s := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/api", Policy: p, Handler: counted(&calls)}}), nil)
	for i := int64(0); i < 3; i++ {
		r := Do(t, s.Client(), "GET", s.URL+"/api")
		if r.Status != http.StatusOK || string(r.Body) != "ok" {
			t.Fatalf("request %d: %d %q, want 200 ok", i, r.Status, r.Body)
		}
		items := CheckFields(t, r)
		it, ok := Find(items, "api")
		if !ok {
			t.Fatalf("request %d: no RateLimit item for api: %q", i, r.Header.Values("RateLimit"))
		}
		if v, _ := it.Int("r"); v != 2-i {
			t.Errorf("request %d: r=%d, want %d", i, v, 2-i)
		}
		pol, _ := Find(List(t, r.Header, "RateLimit-Policy"), "api")
		if q, _ := pol.Int("q"); q != 3 {
			t.Errorf("q=%d, want 3", q)
		}
		if w, _ := pol.Int("w"); w != 60 {
			t.Errorf("w=%d, want 60", w)
		}
		if r.Header.Get("Retry-After") != "" {
			t.Errorf("admitted with Retry-After %q", r.Header.Get("Retry-After"))
		}
		if r.Header.Get("X-RateLimit-Limit") != "" {
			t.Errorf("legacy fields without LegacyHeaders")
		}
	}
	r := Do(t, s.Client(), "GET", s.URL+"/api")
	CheckDenied(t, r, "api")
	if n := calls.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3", n)
	}
}

func testSkipPaths(t *testing.T, h Harness) {
	var health, api atomic.Int64
	p := Policy(t, nethttp.Config{
		Layers:    []nethttp.Layer{{Limiter: Window(t, "api", 1, time.Minute)}},
		SkipPaths: []string{"/healthz"},
	})
	s := Server(t, h.Mount(t, []Route{
		{Method: "GET", Path: "/healthz", Policy: p, Handler: counted(&health)},
		{Method: "GET", Path: "/api", Policy: p, Handler: counted(&api)},
	}), nil)
	for i := 0; i < 5; i++ {
		r := Do(t, s.Client(), "GET", s.URL+"/healthz")
		if r.Status != http.StatusOK {
			t.Fatalf("health check %d: %d", i, r.Status)
		}
		if r.Header.Get("RateLimit") != "" || r.Header.Get("RateLimit-Policy") != "" {
			t.Errorf("skipped path got rate-limit fields %q", r.Header)
		}
	}
	// The health checks took nothing from the quota.
	if r := Do(t, s.Client(), "GET", s.URL+"/api"); r.Status != http.StatusOK {
		t.Errorf("/api after health checks: %d, want 200", r.Status)
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/api"), "api")
	if health.Load() != 5 || api.Load() != 1 {
		t.Errorf("handlers ran %d and %d times, want 5 and 1", health.Load(), api.Load())
	}
}

func testForwardingHeaders(t *testing.T, h Harness) {
	var calls atomic.Int64
	untrusted := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{Limiter: Window(t, "direct", 2, time.Minute)}}})
	trusted := Policy(t, nethttp.Config{
		Layers:         []nethttp.Layer{{Limiter: Window(t, "proxied", 2, time.Minute)}},
		TrustedProxies: []string{"127.0.0.0/8", "::1"},
	})
	s := Server(t, h.Mount(t, []Route{
		{Method: "GET", Path: "/direct", Policy: untrusted, Handler: counted(&calls)},
		{Method: "GET", Path: "/proxied", Policy: trusted, Handler: counted(&calls)},
	}), nil)
	// The loopback peer is not trusted: a new X-Forwarded-For per request
	// does not make a new client.
	for i := 0; i < 2; i++ {
		if r := Do(t, s.Client(), "GET", s.URL+"/direct", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i)); r.Status != http.StatusOK {
			t.Fatalf("direct %d: %d", i, r.Status)
		}
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/direct", "X-Forwarded-For", "198.51.100.99"), "direct")
	// Behind a trusted proxy, the header names the client; the spoofed hop
	// to the left of the proxy's is ignored.
	for i := 0; i < 2; i++ {
		if r := Do(t, s.Client(), "GET", s.URL+"/proxied", "X-Forwarded-For", fmt.Sprintf("6.6.6.%d, 203.0.113.7", i)); r.Status != http.StatusOK {
			t.Fatalf("proxied %d: %d", i, r.Status)
		}
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/proxied", "X-Forwarded-For", "203.0.113.7"), "proxied")
	if r := Do(t, s.Client(), "GET", s.URL+"/proxied", "X-Forwarded-For", "203.0.113.8"); r.Status != http.StatusOK {
		t.Errorf("another client behind the proxy: %d, want 200", r.Status)
	}
	// IPv6 clients in one /64 share a quota.
	for _, c := range []string{"2001:db8:1:2::1", "[2001:db8:1:2::2]:443"} {
		if r := Do(t, s.Client(), "GET", s.URL+"/proxied", "X-Forwarded-For", c); r.Status != http.StatusOK {
			t.Fatalf("proxied %s: %d", c, r.Status)
		}
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/proxied", "X-Forwarded-For", "2001:db8:1:2:ffff::3"), "proxied")
	// Garbage from the proxy falls back to the proxy's own address.
	for i := 0; i < 2; i++ {
		if r := Do(t, s.Client(), "GET", s.URL+"/proxied", "X-Forwarded-For", "not an address"); r.Status != http.StatusOK {
			t.Fatalf("garbage %d: %d", i, r.Status)
		}
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/proxied"), "proxied")
}

func testIdentity(t *testing.T, h Harness) {
	var calls atomic.Int64
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{
		Limiter: Window(t, "per-user", 1, time.Minute),
		Key:     nethttp.Identity(h.UserKey),
	}}})
	s := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/me", Policy: p, Handler: counted(&calls)}}), nil)
	if r := Do(t, s.Client(), "GET", s.URL+"/me", UserHeader, "alice"); r.Status != http.StatusOK {
		t.Fatalf("alice: %d", r.Status)
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/me", UserHeader, "alice"), "per-user")
	if r := Do(t, s.Client(), "GET", s.URL+"/me", UserHeader, "bob"); r.Status != http.StatusOK {
		t.Errorf("bob after alice: %d, want 200", r.Status)
	}
	// Unauthenticated: keyed by address, which is neither alice nor bob.
	if r := Do(t, s.Client(), "GET", s.URL+"/me"); r.Status != http.StatusOK {
		t.Errorf("anonymous: %d, want 200", r.Status)
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/me"), "per-user")
	r := Do(t, s.Client(), "GET", s.URL+"/me", UserHeader, "alice")
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, "alice") {
				t.Errorf("identity echoed in header %s: %q", k, v)
			}
		}
	}
	if strings.Contains(string(r.Body), "alice") {
		t.Errorf("identity echoed in the body: %s", r.Body)
	}
}

func testRouteKey(t *testing.T, h Harness) {
	var calls atomic.Int64
	p := Policy(t, nethttp.Config{
		Layers:         []nethttp.Layer{{Limiter: Window(t, "per-route", 2, time.Minute), Key: nethttp.Route}},
		TrustedProxies: []string{"127.0.0.0/8", "::1"},
	})
	s := Server(t, h.Mount(t, []Route{
		{Method: "GET", Path: "/items/:id", Policy: p, Handler: counted(&calls)},
		{Method: "POST", Path: "/items/:id", Policy: p, Handler: counted(&calls)},
		{Method: "GET", Path: "/other", Policy: p, Handler: counted(&calls)},
	}), nil)
	// One quota for the route, whatever the client and the id.
	if r := Do(t, s.Client(), "GET", s.URL+"/items/1", "X-Forwarded-For", "203.0.113.1"); r.Status != http.StatusOK {
		t.Fatalf("/items/1: %d", r.Status)
	}
	if r := Do(t, s.Client(), "GET", s.URL+"/items/2", "X-Forwarded-For", "203.0.113.2"); r.Status != http.StatusOK {
		t.Fatalf("/items/2: %d", r.Status)
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/items/3", "X-Forwarded-For", "203.0.113.3"), "per-route")
	if r := Do(t, s.Client(), "GET", s.URL+"/other", "X-Forwarded-For", "203.0.113.3"); r.Status != http.StatusOK {
		t.Errorf("another route: %d, want 200", r.Status)
	}
	// A route registered for another method on the same path is another
	// route, with a quota of its own, on every door.
	if r := Do(t, s.Client(), "POST", s.URL+"/items/4", "X-Forwarded-For", "203.0.113.4"); r.Status != http.StatusOK {
		t.Errorf("POST on the path whose GET route is spent: %d, want 200", r.Status)
	}
}

func testCost(t *testing.T, h Harness) {
	var calls atomic.Int64
	fixed := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{Limiter: Window(t, "fixed-cost", 10, time.Minute), Weight: 4}}})
	dynamic := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{
		Limiter: Window(t, "dynamic-cost", 10, time.Minute),
		Cost: func(q *nethttp.Request) int64 {
			var n int64
			_, _ = fmt.Sscan(q.URL.Query().Get("n"), &n)
			return n
		},
	}}})
	s := Server(t, h.Mount(t, []Route{
		{Method: "GET", Path: "/fixed", Policy: fixed, Handler: counted(&calls)},
		{Method: "GET", Path: "/dynamic", Policy: dynamic, Handler: counted(&calls)},
	}), nil)
	for i, wantR := range []int64{6, 2} {
		r := Do(t, s.Client(), "GET", s.URL+"/fixed")
		it, _ := Find(CheckFields(t, r), "fixed-cost")
		if v, _ := it.Int("r"); r.Status != http.StatusOK || v != wantR {
			t.Errorf("fixed %d: %d r=%d, want 200 r=%d", i, r.Status, v, wantR)
		}
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/fixed"), "fixed-cost")

	r := Do(t, s.Client(), "GET", s.URL+"/dynamic?n=11")
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "" {
		t.Errorf("cost above quota: %d Retry-After %q, want 429 without Retry-After", r.Status, r.Header.Get("Retry-After"))
	}
	if pr := Problem(t, r); pr.Type != nethttp.ProblemQuotaExceeded || pr.Detail == "" {
		t.Errorf("cost above quota: problem %+v", pr)
	}
	for _, c := range []struct {
		q     string
		wantR int64
	}{{"n=7", 3}, {"n=-5", 2}, {"n=junk", 1}} { // below 1 is charged as 1
		r := Do(t, s.Client(), "GET", s.URL+"/dynamic?"+c.q)
		it, _ := Find(CheckFields(t, r), "dynamic-cost")
		if v, _ := it.Int("r"); r.Status != http.StatusOK || v != c.wantR {
			t.Errorf("dynamic %s: %d r=%d, want 200 r=%d", c.q, r.Status, v, c.wantR)
		}
	}
	CheckDenied(t, Do(t, s.Client(), "GET", s.URL+"/dynamic?n=2"), "dynamic-cost")
	if n := calls.Load(); n != 5 {
		t.Errorf("handler ran %d times, want 5", n)
	}
}

func testLayers(t *testing.T, h Harness) {
	var calls atomic.Int64
	perIP := Window(t, "per-ip", 100, time.Minute)
	perUser := Window(t, "per-user", 2, time.Minute)
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{
		{Limiter: perIP},
		{Limiter: perUser, Key: nethttp.Identity(h.UserKey)},
	}})
	s := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/api", Policy: p, Handler: counted(&calls)}}), nil)
	for i := 0; i < 2; i++ {
		r := Do(t, s.Client(), "GET", s.URL+"/api", UserHeader, "carol")
		items := CheckFields(t, r)
		if r.Status != http.StatusOK || len(items) != 2 {
			t.Fatalf("request %d: %d with items %v, want 200 with two items", i, r.Status, items)
		}
	}
	r := Do(t, s.Client(), "GET", s.URL+"/api", UserHeader, "carol")
	CheckDenied(t, r, "per-user")
	// The per-ip layer admitted the refused request first, and its unit is
	// refunded (the default): r=98, and the response says so.
	ip, _ := Find(List(t, r.Header, "RateLimit"), "per-ip")
	if v, _ := ip.Int("r"); v != 98 {
		t.Errorf("per-ip r=%d after three requests (one refused and refunded), want 98", v)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func testFailClosed(t *testing.T, h Harness) {
	var calls atomic.Int64
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{
		{Limiter: Window(t, "healthy", 10, time.Minute)},
		{Limiter: DownLimiter(t, "down", core.FailClosed)},
	}})
	s := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/api", Policy: p, Handler: counted(&calls)}}), nil)
	r := Do(t, s.Client(), "GET", s.URL+"/api")
	CheckUnavailable(t, r, "down")
	CheckFields(t, r)
	if calls.Load() != 0 {
		t.Errorf("handler ran with the store down and fail closed")
	}
}

func testFailOpen(t *testing.T, h Harness) {
	var calls atomic.Int64
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{Limiter: DownLimiter(t, "down", core.FailOpen)}}})
	s := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/api", Policy: p, Handler: counted(&calls)}}), nil)
	for i := 0; i < 3; i++ {
		r := Do(t, s.Client(), "GET", s.URL+"/api")
		if r.Status != http.StatusOK {
			t.Fatalf("fail open %d: %d %s", i, r.Status, r.Body)
		}
		// Nothing is known about the quota: no RateLimit item, only the policy.
		if v := r.Header.Values("RateLimit"); len(v) != 0 {
			t.Errorf("fail open wrote RateLimit %q", v)
		}
		CheckFields(t, r)
	}
	if calls.Load() != 3 {
		t.Errorf("handler ran %d times, want 3", calls.Load())
	}
}

func testConcurrencyLease(t *testing.T, h Harness) {
	inflight := Limiter(t, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 1, Window: time.Minute})
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{Limiter: inflight}}})
	started, release := make(chan struct{}, 1), make(chan struct{})
	var panics atomic.Int64
	s := Server(t, h.Mount(t, []Route{
		{Method: "GET", Path: "/slow", Policy: p, Handler: func(w http.ResponseWriter, r *http.Request) {
			started <- struct{}{}
			<-release
		}},
		{Method: "GET", Path: "/boom", Policy: p, Handler: func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Panic") != "" {
				panic("handler failed")
			}
		}},
	}), &panics)

	done := make(chan Response, 1)
	go func() { done <- Do(t, s.Client(), "GET", s.URL+"/slow") }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow handler never started")
	}
	r := Do(t, s.Client(), "GET", s.URL+"/boom")
	CheckDenied(t, r, "inflight")
	pol, _ := Find(List(t, r.Header, "RateLimit-Policy"), "inflight")
	if pol.Params["qu"] != "concurrent-requests" {
		t.Errorf("concurrency policy item %v, want qu=concurrent-requests", pol.Params)
	}
	close(release)
	select {
	case r := <-done:
		if r.Status != http.StatusOK {
			t.Fatalf("slow request: %d", r.Status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never finished")
	}
	// The slow handler returned: its lease is free.
	if r := Do(t, s.Client(), "GET", s.URL+"/boom"); r.Status != http.StatusOK {
		t.Fatalf("after the slow request: %d, want 200", r.Status)
	}
	// A panicking handler gives its lease back, and the panic goes on up.
	for i := 0; i < 3; i++ {
		if r := Do(t, s.Client(), "GET", s.URL+"/boom", "X-Panic", "1"); r.Status != 599 {
			t.Fatalf("panic %d: status %d (%s), want the panic to reach the top (599)", i, r.Status, r.Body)
		}
	}
	if n := panics.Load(); n != 3 {
		t.Errorf("%d panics reached the top, want 3", n)
	}
	if r := Do(t, s.Client(), "GET", s.URL+"/boom"); r.Status != http.StatusOK {
		t.Errorf("after panics: %d, want 200 (the lease was not released)", r.Status)
	}
}

func testLeakyBucketDelay(t *testing.T, h Harness) {
	const interval = 100 * time.Millisecond
	queue := Limiter(t, algorithm.LeakyBucket{}, core.Policy{Name: "queue", Limit: 1, Window: interval, Burst: 1, MaxDelay: time.Second})
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{{Limiter: queue}}})
	var mu sync.Mutex
	var starts []time.Time
	s := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/shaped", Policy: p, Handler: func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
	}}}), nil)
	const n = 3
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := Do(t, s.Client(), "GET", s.URL+"/shaped")
			if r.Status != http.StatusOK {
				t.Errorf("shaped request: %d %s", r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != n {
		t.Fatalf("%d handlers ran, want %d", len(starts), n)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The k-th admitted request starts no earlier than k intervals after
	// the first could: that is the queue's Delay, waited out.
	for k, st := range starts {
		if min := time.Duration(k)*interval - time.Millisecond; st.Sub(t0) < min {
			t.Errorf("handler %d started %v after the first request was sent, want at least %v", k, st.Sub(t0), min)
		}
	}
}
