package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// limitedServer is a real HTTP server on loopback behind Sluice's own
// middleware, counting the requests that reach it and their outcomes.
type limitedServer struct {
	*httptest.Server
	arrived, refused atomic.Int64
}

func newLimitedServer(t *testing.T, alg core.Algorithm, p core.Policy) *limitedServer {
	t.Helper()
	return newLimitedServerOf(t, alg, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

// newLimitedServerOf is newLimitedServer with a handler of the test's.
func newLimitedServerOf(t *testing.T, alg core.Algorithm, p core.Policy, h http.Handler) *limitedServer {
	t.Helper()
	st := memory.New(nil)
	t.Cleanup(func() { st.Close() })
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := nethttp.New(nethttp.Config{Layers: []nethttp.Layer{{Limiter: l}}})
	if err != nil {
		t.Fatal(err)
	}
	s := &limitedServer{}
	limited := mw(h)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.arrived.Add(1)
		rec := &statusRecorder{ResponseWriter: w}
		limited.ServeHTTP(rec, r)
		if rec.status == http.StatusTooManyRequests {
			s.refused.Add(1)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) Flush() { http.NewResponseController(r.ResponseWriter).Flush() }

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func get(t *testing.T, c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A steady run of callers as fast as they can go: the Transport sends no
// request that the server's limit refuses, and still gets close to all the
// limit allows.
func TestSteadyRunSendsNothingThatIsRefused(t *testing.T) {
	for _, c := range []struct {
		alg core.Algorithm
		p   core.Policy
		// least is the share of what the limit allows that the client must
		// get. A window's reset is told in whole seconds (t), rounded up,
		// so the client may wait up to a second past each reset of a 1 s
		// window; a bucket that says so (sluice-burst) is modelled unit by
		// unit and loses next to nothing.
		least float64
	}{
		{algorithm.GCRA{}, core.Policy{Name: "steady-gcra", Limit: 20, Window: time.Second}, 0.6},
		{algorithm.FixedWindow{}, core.Policy{Name: "steady-fw", Limit: 20, Window: time.Second}, 0.6},
		{algorithm.TokenBucket{}, core.Policy{Name: "steady-tb", Limit: 20, Window: time.Second, Burst: 10}, 0.9},
	} {
		t.Run(c.alg.Name(), func(t *testing.T) {
			srv := newLimitedServer(t, c.alg, c.p)
			hc := &http.Client{Transport: &Transport{}}
			const run = 3 * time.Second
			start := time.Now()
			var ok atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for i := 0; i < 1000 && time.Since(start) < run; i++ {
						code, err := get(t, hc, srv.URL)
						if err != nil {
							t.Errorf("GET: %v", err)
							return
						}
						if code == http.StatusOK {
							ok.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			if n := srv.refused.Load(); n != 0 {
				t.Errorf("%d of %d requests sent were refused with 429; want none", n, srv.arrived.Load())
			}
			// What the limit allows over the run: the quota at once, plus
			// the rate for the rest (a fixed window: a quota per window
			// begun, at most one more than the run's seconds).
			allowed := float64(c.p.Capacity()) + float64(c.p.Limit)*elapsed.Seconds()
			if got := float64(ok.Load()); got < c.least*allowed || got > allowed+float64(c.p.Limit) {
				t.Errorf("%v admitted in %v, want between %.0f%% of %.0f and the limit", got, elapsed.Round(time.Millisecond), 100*c.least, allowed)
			}
			t.Logf("%s: %d admitted in %v (the limit allows about %.0f), %d sent, %d refused", c.alg.Name(), ok.Load(), elapsed.Round(time.Millisecond), allowed, srv.arrived.Load(), srv.refused.Load())
		})
	}
}

func TestFailFastSendsNothingOnceSpent(t *testing.T) {
	srv := newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "ff", Limit: 3, Window: time.Hour})
	hc := &http.Client{Transport: &Transport{FailFast: true}}
	for i := range 3 {
		if code, err := get(t, hc, srv.URL); err != nil || code != http.StatusOK {
			t.Fatalf("request %d: %d, %v", i+1, code, err)
		}
	}
	start := time.Now()
	_, err := get(t, hc, srv.URL)
	var le *LimitedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimited) || le.Policy != "ff" || le.Wait <= 0 || le.Wait > time.Hour+time.Second {
		t.Fatalf("4th request: %v; want a *LimitedError for policy ff with a wait until the hour's window ends", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("failing fast took %v", time.Since(start))
	}
	if n := srv.arrived.Load(); n != 3 {
		t.Fatalf("%d requests reached the server, want 3", n)
	}
}

func TestMaxWaitBoundsTheWait(t *testing.T) {
	srv := newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "mw", Limit: 1, Window: time.Hour})
	hc := &http.Client{Transport: &Transport{MaxWait: 50 * time.Millisecond}}
	if code, err := get(t, hc, srv.URL); err != nil || code != http.StatusOK {
		t.Fatalf("first: %d, %v", code, err)
	}
	if _, err := get(t, hc, srv.URL); !errors.Is(err, ErrLimited) {
		t.Fatalf("second: %v, want ErrLimited", err)
	}
	if n := srv.arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the server, want 1", n)
	}
}

func TestWaitHonoursTheContext(t *testing.T) {
	srv := newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "ctx", Limit: 1, Window: time.Hour})
	hc := &http.Client{Transport: &Transport{MaxWait: 2 * time.Hour}}
	if code, err := get(t, hc, srv.URL); err != nil || code != http.StatusOK {
		t.Fatalf("first: %d, %v", code, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	start := time.Now()
	_, err := hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %v; want the context's deadline, promptly", err, time.Since(start))
	}
	if n := srv.arrived.Load(); n != 1 {
		t.Fatalf("%d requests reached the server, want 1", n)
	}
}

// Policies are per host: spending one server's quota holds nothing for
// another.
func TestScopesArePerHost(t *testing.T) {
	a := newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "shared-name", Limit: 1, Window: time.Hour})
	b := newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "shared-name", Limit: 5, Window: time.Hour})
	hc := &http.Client{Transport: &Transport{FailFast: true}}
	if code, err := get(t, hc, a.URL); err != nil || code != http.StatusOK {
		t.Fatalf("a: %d, %v", code, err)
	}
	if _, err := get(t, hc, a.URL); !errors.Is(err, ErrLimited) {
		t.Fatalf("a again: %v, want ErrLimited", err)
	}
	for i := range 5 {
		if code, err := get(t, hc, b.URL); err != nil || code != http.StatusOK {
			t.Fatalf("b %d: %d, %v", i+1, code, err)
		}
	}
}

// refuser answers every request 429 with Retry-After: 1, counting them.
type refuser struct{ n atomic.Int64 }

func (f *refuser) RoundTrip(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {"1"}},
		Body:       io.NopCloser(strings.NewReader("slow down")),
		Request:    r,
	}, nil
}

func TestNeverRetriesANonIdempotentRequest(t *testing.T) {
	base := &refuser{}
	hc := &http.Client{Transport: &Transport{Base: base, Retries: 3}}
	resp, err := hc.Post("http://127.0.0.1:9/orders", "text/plain", strings.NewReader("one order"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || base.n.Load() != 1 {
		t.Fatalf("POST: status %d after %d sends; want the 429, sent once", resp.StatusCode, base.n.Load())
	}
}

func TestRetriesAnIdempotentRequestWhenAsked(t *testing.T) {
	base := &refuser{}
	hc := &http.Client{Transport: &Transport{Base: base, Retries: 1}}
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:9/item", strings.NewReader("v"))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if base.n.Load() != 2 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("PUT: %d sends in %v; want 2, the second after Retry-After (1s)", base.n.Load(), time.Since(start))
	}
}

// stub answers with the given header lines.
type stub struct{ h http.Header }

func (s stub) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: s.h.Clone(), Body: http.NoBody, Request: r}, nil
}

func TestMemoryIsBounded(t *testing.T) {
	tr := &Transport{MaxScopes: 3, Base: stub{http.Header{"Ratelimit": {`"p";r=5;t=10`}}}}
	hc := &http.Client{Transport: tr}
	for i := range 20 {
		if _, err := get(t, hc, fmt.Sprintf("http://127.0.0.%d:9/", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(tr.scopes); n != 3 || tr.lru.Len() != 3 {
		t.Fatalf("%d scopes remembered, want 3", n)
	}
	// A server that names a hundred policies is remembered for maxPolicies.
	var items []string
	for i := range 100 {
		items = append(items, fmt.Sprintf(`"p%d";r=5;t=10`, i))
	}
	tr = &Transport{Base: stub{http.Header{"Ratelimit": {strings.Join(items, ", ")}}}}
	hc = &http.Client{Transport: tr}
	if _, err := get(t, hc, "http://127.0.0.1:9/"); err != nil {
		t.Fatal(err)
	}
	if n := len(tr.get("127.0.0.1:9").policies); n != maxPolicies {
		t.Fatalf("%d policies remembered, want %d", n, maxPolicies)
	}
}

func TestMalformedFieldsAreIgnored(t *testing.T) {
	for _, v := range []string{`garbage;;;`, `"p";r=-1;t=5`, `"p";r=x;t=5`, `p;r=1;t=1`, `"p";r=1`, `"p";r=1;t=99999999999999999`} {
		tr := &Transport{FailFast: true, Base: stub{http.Header{"Ratelimit": {v}, "Retry-After": {"soon"}}}}
		hc := &http.Client{Transport: tr}
		for i := range 3 {
			if _, err := get(t, hc, "http://127.0.0.1:9/"); err != nil && !strings.Contains(v, "99999") {
				t.Fatalf("RateLimit %q, request %d: %v", v, i, err)
			}
		}
	}
}

// A server that sends no RateLimit fields is not held back: once its first
// response has said nothing, concurrent requests go out together.
func TestSilentServerIsNotSerialized(t *testing.T) {
	var inside atomic.Int64
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inside.Add(1) > 1 {
			<-block
		}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &Transport{}}
	if _, err := get(t, hc, srv.URL); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { get(t, hc, srv.URL) })
	}
	deadline := time.Now().Add(5 * time.Second)
	for inside.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := inside.Load() - 1
	close(block)
	wg.Wait()
	if got != 4 {
		t.Fatalf("%d of 4 concurrent requests reached a server that sends no RateLimit fields; want all at once", got)
	}
}

func FuzzFields(f *testing.F) {
	for _, s := range []string{`"a";r=1;t=2`, `"a";q=5;w=60;sluice-burst=9`, `, ,`, `"x";r=1;t=1, "y";r=0;t=3`, "Wed, 21 Oct 2015 07:28:00 GMT", "120"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		parseRateLimit([]string{v})
		parsePolicies([]string{v})
		if d, ok := retryAfter(v, time.Now()); ok && (d < 0 || d > maxSeconds*time.Second) {
			t.Fatalf("Retry-After %q: %v", v, d)
		}
	})
}

// blocker answers once release is closed, counting requests in flight.
type blocker struct {
	release chan struct{}
	started chan struct{}
}

func (b *blocker) RoundTrip(r *http.Request) (*http.Response, error) {
	b.started <- struct{}{}
	<-b.release
	return &http.Response{StatusCode: 200, Header: http.Header{"Ratelimit": {`"p";r=5;t=10`}}, Body: http.NoBody, Request: r}, nil
}

// A response whose scope was forgotten meanwhile (MaxScopes) is read into
// the scope that sent it, and leaves the counts of a new one alone.
func TestForgottenScopeKeepsCountsRight(t *testing.T) {
	b := &blocker{release: make(chan struct{}), started: make(chan struct{}, 2)}
	tr := &Transport{MaxScopes: 1, Base: b, FailFast: true}
	hc := &http.Client{Transport: tr}
	done := make(chan error, 2)
	go func() { _, err := get(t, hc, "http://127.0.0.1:9/a"); done <- err }()
	<-b.started
	go func() { _, err := get(t, hc, "http://127.0.0.2:9/b"); done <- err }() // forgets 127.0.0.1:9
	<-b.started
	tr.mu.Lock()
	fresh := tr.get("127.0.0.1:9") // a new scope for the first host, forgetting the second
	tr.mu.Unlock()
	close(b.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if fresh.inflight != 0 || fresh.learned {
		t.Fatalf("the new scope has %d in flight, learned %v; want 0, false: the old request's answer belongs to the old scope", fresh.inflight, fresh.learned)
	}
}

// A shadow limit never refuses, and a client that honours the limits it is
// told must not refuse for it either: the door announces no shadow layer,
// so a FailFast Transport sends every request of a run the shadow limit
// would have refused.
func TestAShadowLimitHoldsNoRequest(t *testing.T) {
	st := memory.New(nil)
	t.Cleanup(func() { st.Close() })
	l, err := core.New(core.Config{Policy: core.Policy{Name: "dark", Limit: 2, Window: time.Minute},
		Algorithm: algorithm.GCRA{}, Store: st, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := nethttp.New(nethttp.Config{Layers: []nethttp.Layer{{Limiter: l}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &Transport{FailFast: true}}
	for i := range 6 {
		code, err := get(t, c, srv.URL)
		if err != nil || code != http.StatusOK {
			t.Fatalf("request %d under a shadow limit of 2/min: %d, %v; want 200, sent", i, code, err)
		}
	}
}

// A 503 that says when to come back (Retry-After) is retried as a 429 is,
// within Retries; one that does not is returned at once: nobody knows when
// the server is back.
func TestRetriesAfterA503ThatSaysWhen(t *testing.T) {
	for _, withRA := range []bool{true, false} {
		var hits atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) == 1 {
				if withRA {
					w.Header().Set("Retry-After", "1")
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
		hc := &http.Client{Transport: &Transport{Retries: 2}}
		code, err := get(t, hc, srv.URL)
		srv.Close()
		want, wantHits := http.StatusOK, int64(2)
		if !withRA {
			want, wantHits = http.StatusServiceUnavailable, 1
		}
		if err != nil || code != want || hits.Load() != wantHits {
			t.Errorf("503 with Retry-After %v: %d, %v after %d sends; want %d after %d", withRA, code, err, hits.Load(), want, wantHits)
		}
	}
}

// MaxWait bounds a request's whole wait, not each sleep of it: five
// callers at once on a quota of one a second with MaxWait 1.5 s send two
// (at once, and a second later) and the other three return a LimitedError
// within MaxWait, rather than each waiting its turn for up to 5 s.
func TestMaxWaitBoundsTheWholeWait(t *testing.T) {
	srv := newLimitedServer(t, algorithm.GCRA{}, core.Policy{Name: "one", Limit: 1, Window: time.Second})
	const maxWait = 1500 * time.Millisecond
	hc := &http.Client{Transport: &Transport{MaxWait: maxWait}}
	if code, err := get(t, hc, srv.URL); err != nil || code != http.StatusOK { // learn the policy
		t.Fatalf("first: %d, %v", code, err)
	}
	var wg sync.WaitGroup
	var limited atomic.Int64
	for range 5 {
		wg.Go(func() {
			start := time.Now()
			_, err := get(t, hc, srv.URL)
			took := time.Since(start)
			switch {
			case errors.Is(err, ErrLimited):
				limited.Add(1)
			case err != nil:
				t.Errorf("a request: %v", err)
			}
			if took > maxWait+300*time.Millisecond {
				t.Errorf("a request took %v with MaxWait %v (%v)", took.Round(time.Millisecond), maxWait, err)
			}
		})
	}
	wg.Wait()
	if limited.Load() < 3 {
		t.Errorf("%d of 5 requests returned a LimitedError; want at least the 3 that could not go within MaxWait", limited.Load())
	}
	if n := srv.refused.Load(); n != 0 {
		t.Errorf("%d requests were refused by the server", n)
	}
}

// A negative MaxWait never waits, as FailFast does: not for the response
// of a request already out either.
func TestNegativeMaxWaitNeverWaits(t *testing.T) {
	release := make(chan struct{})
	var first atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			<-release
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the held request
	hc := &http.Client{Transport: &Transport{MaxWait: -1}}
	go get(t, hc, srv.URL) // out, and held: nothing is known of the server yet
	for deadline := time.Now().Add(2 * time.Second); !first.Load() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		code, err := get(t, hc, srv.URL)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("second: %v", err)
		}
	case <-time.After(time.Second):
		t.Error("with MaxWait -1 the second request waited for the first's response")
	}
}

// A 429 without Retry-After from a server that speaks the RateLimit
// fields says no wait would help (a cost above the quota, which Sluice's
// doors answer so): the request is not sent again, and the scope is not
// held for the requests that fit.
func TestA429ThatNoWaitHelpsIsNotRetried(t *testing.T) {
	st := memory.New(nil)
	t.Cleanup(func() { st.Close() })
	l, err := core.New(core.Config{Policy: core.Policy{Name: "units", Limit: 100, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	mw, err := nethttp.New(nethttp.Config{Layers: []nethttp.Layer{{Limiter: l, Cost: func(q *nethttp.Request) int64 {
		if q.URL.Path == "/export" {
			return 1000
		}
		return 1
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	var exports atomic.Int64
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	t.Cleanup(srv.Close)
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/export" {
			exports.Add(1)
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(counted.Close)
	hc := &http.Client{Transport: &Transport{Retries: 2}}
	if code, err := get(t, hc, counted.URL+"/cheap"); err != nil || code != http.StatusOK {
		t.Fatalf("cheap: %d, %v", code, err)
	}
	if code, err := get(t, hc, counted.URL+"/export"); err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("export: %d, %v; want the 429", code, err)
	}
	if n := exports.Load(); n != 1 {
		t.Errorf("a request that can never be admitted was sent %d times", n)
	}
	start := time.Now()
	if code, err := get(t, hc, counted.URL+"/cheap"); err != nil || code != http.StatusOK {
		t.Fatalf("cheap after: %d, %v", code, err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("a request that fits was held %v after the refusal", took.Round(time.Millisecond))
	}
}

// A concurrency limit (qu="concurrent-requests") counts requests in
// flight, not requests sent: a unit comes back with its response, not at
// the item's t. One request after another never waits, however many; and
// callers at once keep no more in flight than the limit, so none is
// refused.
func TestAConcurrencyLimitCountsRequestsInFlight(t *testing.T) {
	s := newLimitedServer(t, algorithm.Concurrency{}, core.Policy{Name: "in-flight", Limit: 2, Window: time.Minute, LeaseTTL: time.Minute})
	c := &http.Client{Transport: &Transport{FailFast: true}}
	for i := range 10 {
		if code, err := get(t, c, s.URL); err != nil || code != http.StatusOK {
			t.Fatalf("request %d, one at a time under a concurrency limit of 2: %d, %v; want 200", i, code, err)
		}
	}
	slow := newLimitedServerOf(t, algorithm.Concurrency{}, core.Policy{Name: "in-flight", Limit: 2, Window: time.Minute, LeaseTTL: time.Minute},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(5 * time.Millisecond) }))
	w := &http.Client{Transport: &Transport{MaxWait: 5 * time.Second}}
	if code, err := get(t, w, slow.URL); err != nil || code != http.StatusOK {
		t.Fatalf("the first request: %d, %v", code, err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				if code, err := get(t, w, slow.URL); err != nil || code != http.StatusOK {
					t.Errorf("four callers under a concurrency limit of 2: %d, %v; want 200", code, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := slow.refused.Load(); n > 0 {
		t.Errorf("the server refused %d requests of four callers under a concurrency limit of 2", n)
	}
}

// streamingServer is a server behind a concurrency limit of 1
// ("in-flight"), whose handler, for a request with the query "stream",
// writes "head ", flushes it, and writes "tail" once finish is closed (or
// after 5 s): its unit is held until then. Other requests return at once.
func streamingServer(t *testing.T, finish chan struct{}) *limitedServer {
	return newLimitedServerOf(t, algorithm.Concurrency{}, core.Policy{Name: "in-flight", Limit: 1, Window: time.Minute, LeaseTTL: time.Minute},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.RawQuery != "stream" {
				return
			}
			io.WriteString(w, "head ")
			http.NewResponseController(w).Flush()
			select {
			case <-finish:
			case <-time.After(5 * time.Second):
			}
			io.WriteString(w, "tail")
		}))
}

// A server holds a request's concurrency unit until its handler returns,
// which for a streamed body is after the headers have reached the client:
// the unit comes back when the body has been read to its end or closed.
func TestAConcurrencyUnitComesBackWithTheWholeBody(t *testing.T) {
	finish := make(chan struct{})
	s := streamingServer(t, finish)
	c := &http.Client{Transport: &Transport{MaxWait: 5 * time.Second}}
	if code, err := get(t, c, s.URL); err != nil || code != http.StatusOK { // learn the limit
		t.Fatalf("the first request: %d, %v", code, err)
	}
	streamed, err := c.Get(s.URL + "?stream")
	if err != nil || streamed.StatusCode != http.StatusOK {
		t.Fatalf("the streamed request: %v, %v", streamed, err)
	}
	second := make(chan error, 1)
	go func() {
		code, err := get(t, c, s.URL)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		second <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if n := s.arrived.Load(); n != 2 {
		t.Errorf("%d requests reached the server while the first one's body was still streaming under a concurrency limit of 1; want 2 (the one before, and it)", n)
	}
	close(finish)
	if body, err := io.ReadAll(streamed.Body); err != nil || string(body) != "head tail" {
		t.Fatalf("the streamed body: %q, %v", body, err)
	}
	streamed.Body.Close()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("the request after the streamed one: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request after the streamed one did not go once its body was read")
	}
	if n := s.refused.Load(); n > 0 {
		t.Errorf("the server refused %d requests under a concurrency limit of 1", n)
	}
}

// A concurrency limit known spent (its one unit held by a body still
// open) holds the next request: under FailFast it is not sent but a
// *LimitedError naming the policy; with MaxWait it waits for the unit and
// then names the policy too, not a Retry-After nobody sent.
func TestASpentConcurrencyLimitHoldsFailFastRequests(t *testing.T) {
	for _, tr := range []*Transport{{FailFast: true}, {MaxWait: -1}, {MaxWait: 300 * time.Millisecond}} {
		finish := make(chan struct{})
		s := streamingServer(t, finish)
		c := &http.Client{Transport: tr}
		if code, err := get(t, c, s.URL); err != nil || code != http.StatusOK { // learn the limit
			t.Fatalf("the first request: %d, %v", code, err)
		}
		streamed, err := c.Get(s.URL + "?stream")
		if err != nil || streamed.StatusCode != http.StatusOK {
			t.Fatalf("the streamed request: %v, %v", streamed, err)
		}
		arrived := s.arrived.Load()
		_, err = c.Get(s.URL)
		var le *LimitedError
		if !errors.As(err, &le) || le.Policy != "in-flight" || strings.Contains(le.Error(), "Retry-After") {
			t.Errorf("FailFast %v, MaxWait %v: a request while the one unit is held: %v; want a *LimitedError naming in-flight", tr.FailFast, tr.MaxWait, err)
		}
		if n := s.arrived.Load() - arrived; n != 0 {
			t.Errorf("FailFast %v, MaxWait %v: %d requests reached the server while its one unit was held", tr.FailFast, tr.MaxWait, n)
		}
		close(finish)
		io.Copy(io.Discard, streamed.Body)
		streamed.Body.Close()
		if n := s.refused.Load(); n > 0 {
			t.Errorf("FailFast %v, MaxWait %v: the server refused %d requests under a concurrency limit of 1", tr.FailFast, tr.MaxWait, n)
		}
	}
}

// Under a concurrency limit of 2 with both units held by open bodies,
// closing one body gives its unit back: the next request goes at once, and
// the server refuses nothing.
func TestEachClosedBodyGivesItsUnitBack(t *testing.T) {
	for _, tr := range []*Transport{{FailFast: true}, {MaxWait: time.Second}} {
		finish := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
		s := newLimitedServerOf(t, algorithm.Concurrency{}, core.Policy{Name: "in-flight", Limit: 2, Window: time.Minute, LeaseTTL: time.Minute},
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ch, ok := finish[r.URL.RawQuery]
				if !ok {
					return
				}
				io.WriteString(w, "head ")
				http.NewResponseController(w).Flush()
				select {
				case <-ch:
				case <-time.After(5 * time.Second):
				}
			}))
		c := &http.Client{Transport: tr}
		if code, err := get(t, c, s.URL); err != nil || code != http.StatusOK { // learn the limit
			t.Fatalf("the first request: %d, %v", code, err)
		}
		bodies := map[string]*http.Response{}
		for _, q := range []string{"a", "b"} {
			resp, err := c.Get(s.URL + "?" + q)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("stream %s: %v, %v", q, resp, err)
			}
			bodies[q] = resp
		}
		close(finish["a"])
		io.Copy(io.Discard, bodies["a"].Body)
		bodies["a"].Body.Close()
		start := time.Now()
		if code, err := get(t, c, s.URL); err != nil || code != http.StatusOK {
			t.Errorf("FailFast %v: the request after one of two bodies closed: %d, %v; want it sent and admitted", tr.FailFast, code, err)
		} else if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("FailFast %v: the request after one of two bodies closed waited %v", tr.FailFast, took)
		}
		close(finish["b"])
		io.Copy(io.Discard, bodies["b"].Body)
		bodies["b"].Body.Close()
		if n := s.refused.Load(); n > 0 {
			t.Errorf("FailFast %v: the server refused %d requests under a concurrency limit of 2", tr.FailFast, n)
		}
	}
}

// A request with no URL is an error, as http.Transport returns one, not a
// panic.
func TestNilURLIsAnError(t *testing.T) {
	tr := &Transport{}
	r := &http.Request{Method: http.MethodGet, Header: http.Header{}}
	if resp, err := tr.RoundTrip(r); err == nil {
		resp.Body.Close()
		t.Fatal("RoundTrip of a request with a nil URL: no error")
	}
}

// MaxWait bounds a request's wait in all, its retries' waits included:
// with Retries 4 against a server that always asks for a second, a request
// with MaxWait 1.5 s is sent twice (at once and a second later) and then
// returns the refusal, rather than waiting a fresh MaxWait each retry.
func TestMaxWaitBoundsTheRetriesToo(t *testing.T) {
	base := &refuser{}
	hc := &http.Client{Transport: &Transport{Base: base, Retries: 4, MaxWait: 1500 * time.Millisecond}}
	start := time.Now()
	code, err := get(t, hc, "http://127.0.0.1:9/")
	took := time.Since(start)
	if err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("%d, %v; want the 429", code, err)
	}
	if n := base.n.Load(); n != 2 || took > 1800*time.Millisecond {
		t.Fatalf("%d sends in %v with MaxWait 1.5s; want 2, within it", n, took.Round(time.Millisecond))
	}
}

// A server that names its policies at length cannot make the Transport
// keep more than maxName bytes of each name: a longer one is not read.
func TestLongPolicyNamesAreNotKept(t *testing.T) {
	long := strings.Repeat("n", 60_000)
	tr := &Transport{Base: stub{http.Header{
		"Ratelimit":        {`"` + long + `";r=5;t=10, "short";r=5;t=10`},
		"Ratelimit-Policy": {`"` + long + `";q=10;w=10, "short";q=10;w=10`},
	}}}
	hc := &http.Client{Transport: tr}
	if _, err := get(t, hc, "http://127.0.0.1:9/"); err != nil {
		t.Fatal(err)
	}
	ps := tr.get("127.0.0.1:9").policies
	for name := range ps {
		if len(name) > maxName {
			t.Fatalf("a policy name of %d bytes is kept; at most %d", len(name), maxName)
		}
	}
	if ps["short"] == nil {
		t.Fatal("the short policy was not read")
	}
}

// A body closed before its end gives its unit back at once, while the
// server's handler may still hold it: a request sent then may be refused.
// That refusal's Retry-After is when the server's last lease would expire
// (a minute here), a bound and not a wait: the Transport holds the scope
// for a second, not the minute, and the next request goes once the
// handler has returned.
func TestAConcurrencyRefusalHoldsTheScopeBriefly(t *testing.T) {
	finish := make(chan struct{})
	s := streamingServer(t, finish)
	c := &http.Client{Transport: &Transport{MaxWait: 5 * time.Second}}
	if code, err := get(t, c, s.URL); err != nil || code != http.StatusOK { // learn the limit
		t.Fatalf("first: %d, %v", code, err)
	}
	resp, err := c.Get(s.URL + "?stream")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 5))
	resp.Body.Close() // early: the handler still holds the unit
	code, err := get(t, c, s.URL)
	if err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("a request while the handler still runs: %d, %v; want the server's 429", code, err)
	}
	time.Sleep(200 * time.Millisecond)
	close(finish)
	start := time.Now()
	code, err = get(t, c, s.URL)
	if err != nil || code != http.StatusOK || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("a request after the handler returned: %d, %v after %v; want 200 within a second or so", code, err, time.Since(start).Round(time.Millisecond))
	}
}

// A Retry-After of more seconds than an int64 holds is a wait of at least
// a week, as every shorter one past a week is, not no wait at all.
func TestRetryAfterPastInt64IsCapped(t *testing.T) {
	for _, v := range []string{"9223372036854775807", "9223372036854775808", "99999999999999999999"} {
		if d, ok := retryAfter(v, time.Now()); !ok || d != maxSeconds*time.Second {
			t.Errorf("Retry-After %s: %v, %v; want a week", v, d, ok)
		}
	}
}

// A Retry-After of 0 (or an HTTP date already past) asks for a retry now:
// an idempotent request is sent again at once, within Retries, after a 503
// and a 429 alike, from a server with RateLimit fields or without.
func TestRetryAfterZeroIsRetriedAtOnce(t *testing.T) {
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		status int
		ra     string
		fields bool
	}{
		{http.StatusServiceUnavailable, "0", false},
		{http.StatusServiceUnavailable, past, false},
		{http.StatusTooManyRequests, "0", false},
		{http.StatusTooManyRequests, "0", true},
	} {
		var hits atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits.Add(1) == 1 {
				w.Header().Set("Retry-After", c.ra)
				if c.fields {
					w.Header().Set("RateLimit", `"p";r=0;t=0`)
					w.Header().Set("RateLimit-Policy", `"p";q=5;w=1`)
				}
				w.WriteHeader(c.status)
			}
		}))
		hc := &http.Client{Transport: &Transport{Retries: 2}}
		start := time.Now()
		code, err := get(t, hc, srv.URL)
		took := time.Since(start)
		srv.Close()
		if err != nil || code != http.StatusOK || hits.Load() != 2 || took > 500*time.Millisecond {
			t.Errorf("%d with Retry-After %q (RateLimit fields %v): %d, %v after %d sends in %v; want 200 after 2, at once",
				c.status, c.ra, c.fields, code, err, hits.Load(), took.Round(time.Millisecond))
		}
	}
}

// Past MaxScopes, a scope that holds nothing back is forgotten before one
// that does: a host whose quota is spent stays known while many hosts with
// room come and go, and the Transport sends it nothing its limit refuses.
func TestASpentScopeOutlivesScopesWithRoom(t *testing.T) {
	spent := newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "one", Limit: 1, Window: time.Hour})
	var roomy []*limitedServer
	for range 5 {
		roomy = append(roomy, newLimitedServer(t, algorithm.FixedWindow{}, core.Policy{Name: "many", Limit: 1000, Window: time.Hour}))
	}
	hc := &http.Client{Transport: &Transport{MaxScopes: 3, FailFast: true}}
	if code, err := get(t, hc, spent.URL); err != nil || code != http.StatusOK {
		t.Fatalf("first request: %d, %v", code, err)
	}
	for round := range 3 {
		for i, s := range roomy {
			if code, err := get(t, hc, s.URL); err != nil || code != http.StatusOK {
				t.Fatalf("round %d, roomy host %d: %d, %v", round, i, code, err)
			}
		}
		if _, err := get(t, hc, spent.URL); !errors.Is(err, ErrLimited) {
			t.Fatalf("round %d: the spent host after %d others: %v; want ErrLimited, not sent", round, len(roomy), err)
		}
	}
	if n := spent.refused.Load(); n != 0 {
		t.Fatalf("the spent host refused %d requests; want none sent", n)
	}
}

// sequence answers each request with the next of its headers (the last
// one again once they run out).
type sequence struct {
	mu sync.Mutex
	hs []http.Header
}

func (s *sequence) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	h := s.hs[0]
	if len(s.hs) > 1 {
		s.hs = s.hs[1:]
	}
	s.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: h.Clone(), Body: http.NoBody, Request: r}, nil
}

// A scope remembers maxPolicies policies; a policy reported once they are
// all known takes the place of the one reported least recently that holds
// nothing back, so that a server whose policies change over time (renamed
// at a deploy, tiers) is still honoured: its new, spent policy holds the
// requests it refuses.
func TestANewPolicyTakesAnIdlePolicysPlace(t *testing.T) {
	var items []string
	for i := range maxPolicies {
		items = append(items, fmt.Sprintf(`"old%d";r=500;t=3600`, i))
	}
	tr := &Transport{FailFast: true, Base: &sequence{hs: []http.Header{
		{"Ratelimit": {strings.Join(items, ", ")}},
		{"Ratelimit": {`"strict";r=0;t=3600`}},
	}}}
	hc := &http.Client{Transport: tr}
	for i := range 2 {
		if _, err := get(t, hc, "http://127.0.0.1:9/"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	_, err := get(t, hc, "http://127.0.0.1:9/")
	var le *LimitedError
	if !errors.As(err, &le) || le.Policy != "strict" {
		t.Fatalf("after a 17th policy reported spent: %v; want a LimitedError of policy \"strict\"", err)
	}
	if n := len(tr.get("127.0.0.1:9").policies); n > maxPolicies {
		t.Fatalf("%d policies remembered, want at most %d", n, maxPolicies)
	}
}
