package nethttp

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A shadow limiter's refusals reach the client as admissions that say
// nothing about them: 200, no Retry-After, and no RateLimit item of the
// shadow layer (a client that honours the fields would otherwise hold the
// requests the limit is not to refuse). The same limit enforced answers
// 429. Beside an enforced layer, only that layer is announced.
func TestShadowResponsesSayNothing(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		s := memory.New(nil)
		t.Cleanup(func() { _ = s.Close() })
		l, err := core.New(core.Config{
			Policy:    core.Policy{Name: "dark", Limit: 2, Window: time.Minute},
			Algorithm: algorithm.SlidingLog{}, Store: s, Shadow: shadow,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := Middleware(testPolicy(t, Config{Layers: []Layer{{Limiter: l}}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		for i := range 5 {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			refused := i >= 2
			wantCode := http.StatusOK
			if refused && !shadow {
				wantCode = http.StatusTooManyRequests
			}
			if w.Code != wantCode {
				t.Fatalf("shadow %v, request %d: %d; want %d", shadow, i, w.Code, wantCode)
			}
			hd := w.Header()
			if !shadow {
				if !strings.HasPrefix(hd.Get(HeaderRateLimit), `"dark";`) {
					t.Fatalf("request %d of an enforced policy: RateLimit %q", i, hd.Get(HeaderRateLimit))
				}
				continue
			}
			for _, f := range []string{HeaderRetryAfter, HeaderRateLimit, HeaderRateLimitPolicy} {
				if v := hd.Values(f); v != nil {
					t.Fatalf("request %d of a shadow policy: %s %q", i, f, v)
				}
			}
		}
	}

	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	dark, err := core.New(core.Config{Policy: core.Policy{Name: "dark", Limit: 1, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	lit, err := core.New(core.Config{Policy: core.Policy{Name: "lit", Limit: 10, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	h := Middleware(testPolicy(t, Config{Layers: []Layer{{Limiter: dark}, {Limiter: lit}}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		rl, pol := w.Header().Get(HeaderRateLimit), w.Header().Get(HeaderRateLimitPolicy)
		if w.Code != http.StatusOK || strings.Contains(rl+pol, "dark") || !strings.HasPrefix(rl, `"lit";r=`) || !strings.HasPrefix(pol, `"lit";q=10`) {
			t.Fatalf("request %d: %d, RateLimit %q, RateLimit-Policy %q; want 200 and the lit layer alone", i, w.Code, rl, pol)
		}
	}
}

// A shadow layer that would refuse does not lengthen the Retry-After of a
// refusal by a later, enforced layer: the retry passes the shadow layer
// whatever it counts, so the wait is the enforced layer's.
func TestShadowLayerIsNotInRetryAfter(t *testing.T) {
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	dark, err := core.New(core.Config{Policy: core.Policy{Name: "dark", Limit: 1, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: s, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := core.New(core.Config{Policy: core.Policy{Name: "sec", Limit: 1, Window: time.Second}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	h := Middleware(testPolicy(t, Config{Layers: []Layer{{Limiter: dark}, {Limiter: sec}}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != want {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want)
		}
		if ra := w.Header().Get(HeaderRetryAfter); want == http.StatusTooManyRequests && ra != "1" {
			t.Errorf("request %d: Retry-After %q; want 1, the enforced one-second layer's wait", i, ra)
		}
	}
}

// A shadow layer never refuses, also a request whose cost exceeds its
// quota, which an enforced layer answers 429 without a decision: the
// request passes the shadow layer, uncounted there.
func TestShadowLayerCostAboveQuota(t *testing.T) {
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	dark, err := core.New(core.Config{Policy: core.PerSecond("dark", 4), Algorithm: algorithm.GCRA{}, Store: s, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	lit, err := core.New(core.Config{Policy: core.Policy{Name: "lit", Limit: 100, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	cost := func(*Request) int64 { return 5 }
	h := Middleware(testPolicy(t, Config{Layers: []Layer{{Limiter: dark, Cost: cost}, {Limiter: lit, Cost: cost}}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if rl := w.Header().Get(HeaderRateLimit); w.Code != http.StatusOK || !strings.HasPrefix(rl, `"lit";r=`+strconv.Itoa(100-5*(i+1))) {
			t.Fatalf("request %d costing 5 over a shadow layer of 4: %d, RateLimit %q; want 200 and the lit layer charged", i, w.Code, rl)
		}
	}
}

// A shadow layer whose store is down lets the request through: its limit
// never refuses, and a dark launch must not make its store a dependency
// of the requests it watches (the default FailClosed included).
func TestShadowLayerOnAStoreThatIsDown(t *testing.T) {
	dark, err := core.New(core.Config{Policy: core.Policy{Name: "dark", Limit: 1, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: downStore{}, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	h := Middleware(testPolicy(t, Config{Layers: []Layer{{Limiter: dark}}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d through a shadow layer on a store that is down: %d %s; want 200", i, w.Code, w.Body)
		}
	}
}
