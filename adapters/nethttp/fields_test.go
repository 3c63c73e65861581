package nethttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// clocked returns a limiter on a memory store, both reading clock.
func clocked(t *testing.T, clock core.Clock, alg core.Algorithm, p core.Policy) *core.Limiter {
	t.Helper()
	s := memory.New(&memory.Options{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// admit runs one request through p and returns the recorded response and
// whether the handler may run.
func admit(t *testing.T, p *Policy, r *http.Request) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	w := httptest.NewRecorder()
	a, ok := p.Admit(w, r, "", nil)
	if ok {
		a.Done()
	}
	return w, ok
}

// admitFirst makes a request from 203.0.113.7 that p must admit.
func admitFirst(t *testing.T, p *Policy) {
	t.Helper()
	if w, ok := admit(t, p, request("203.0.113.7:1")); !ok {
		t.Fatalf("first request refused: %d", w.Code)
	}
}

// refuseNext makes a request from 203.0.113.7 that p must refuse, by what,
// and returns its response.
func refuseNext(t *testing.T, p *Policy, what string) *httptest.ResponseRecorder {
	t.Helper()
	w, ok := admit(t, p, request("203.0.113.7:1"))
	if ok {
		t.Fatalf("second request admitted by %s", what)
	}
	return w
}

func request(peer string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = peer
	return r
}

// list parses a header as a Structured Field List of Items whose values are
// Strings, and returns each item's parameters by name.
func list(t *testing.T, h http.Header, name string) (names []string, params map[string]map[string]any) {
	t.Helper()
	l, err := httpsfv.UnmarshalList(h.Values(name))
	if err != nil {
		t.Fatalf("%s %q is not a Structured Field List: %v", name, h.Values(name), err)
	}
	params = map[string]map[string]any{}
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%s: member %#v is not an Item", name, m)
		}
		s, ok := it.Value.(string)
		if !ok {
			t.Fatalf("%s: item value %#v is not a String", name, it.Value)
		}
		ps := map[string]any{}
		for _, k := range it.Params.Names() {
			ps[k], _ = it.Params.Get(k)
		}
		names = append(names, s)
		params[s] = ps
	}
	return names, params
}

func TestPolicyField(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_700_000_040, 0))
	p := testPolicy(t, Config{Layers: []Layer{
		{Limiter: clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 100, Window: time.Minute})},
		{Limiter: clocked(t, clock, algorithm.TokenBucket{}, core.Policy{Name: "tb", Limit: 10, Window: time.Second, Burst: 20})},
		{Limiter: clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "sub.second_1", Limit: 5, Window: 1500 * time.Millisecond})},
	}})
	want := `"per-ip";q=100;w=60, "tb";q=10;w=1;sluice-burst=20, "sub.second_1";q=5`
	if p.policyField != want {
		t.Fatalf("RateLimit-Policy\n got %s\nwant %s", p.policyField, want)
	}
	w, ok := admit(t, p, request("203.0.113.7:1"))
	if !ok {
		t.Fatalf("first request refused: %d %s", w.Code, w.Body)
	}
	names, params := list(t, w.Header(), "RateLimit-Policy")
	if len(names) != 3 || names[0] != "per-ip" || names[1] != "tb" || names[2] != "sub.second_1" {
		t.Fatalf("RateLimit-Policy names %q", names)
	}
	if q, w := params["per-ip"]["q"], params["per-ip"]["w"]; q != int64(100) || w != int64(60) {
		t.Errorf("per-ip q=%v w=%v", q, w)
	}
	if _, ok := params["sub.second_1"]["w"]; ok {
		t.Errorf("a 1.5s window got a w parameter: %v", params["sub.second_1"])
	}
}

func TestRateLimitFieldFromTheDecision(t *testing.T) {
	// 40s into a minute (1_699_999_980 is a multiple of 60): a fixed window
	// resets in 20s.
	clock := core.NewManualClock(time.Unix(1_700_000_020, 0))
	p := testPolicy(t, Config{Layers: []Layer{
		{Limiter: clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 3, Window: time.Minute})},
	}, LegacyHeaders: true})
	for i, wantR := range []int64{2, 1, 0} {
		w, ok := admit(t, p, request("203.0.113.7:1"))
		if !ok {
			t.Fatalf("request %d refused: %d", i, w.Code)
		}
		if got := w.Header().Get("RateLimit"); got != `"per-ip";r=`+itoa(wantR)+`;t=20` {
			t.Errorf("request %d: RateLimit %q", i, got)
		}
		if got := w.Header().Get("X-RateLimit-Remaining"); got != itoa(wantR) {
			t.Errorf("request %d: X-RateLimit-Remaining %q", i, got)
		}
		if w.Header().Get("Retry-After") != "" {
			t.Errorf("request %d: admitted with Retry-After", i)
		}
	}
	clock.Advance(500 * time.Millisecond)
	w, ok := admit(t, p, request("203.0.113.7:1"))
	if ok || w.Code != http.StatusTooManyRequests {
		t.Fatalf("fourth request: %v %d, want 429", ok, w.Code)
	}
	h := w.Header()
	// 19.5s left: rounded up.
	if got := h.Get("Retry-After"); got != "20" {
		t.Errorf("Retry-After %q, want 20", got)
	}
	if got := h.Get("RateLimit"); got != `"per-ip";r=0;t=20` {
		t.Errorf("RateLimit %q", got)
	}
	if h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset") != "20" {
		t.Errorf("legacy fields %q %q %q", h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"))
	}
	if ct := h.Get("Content-Type"); ct != ContentTypeProblem {
		t.Errorf("Content-Type %q", ct)
	}
	var pr Problem
	if err := json.Unmarshal(w.Body.Bytes(), &pr); err != nil {
		t.Fatalf("body %s: %v", w.Body, err)
	}
	if pr.Type != ProblemQuotaExceeded || pr.Status != 429 || len(pr.ViolatedPolicies) != 1 || pr.ViolatedPolicies[0] != "per-ip" {
		t.Errorf("problem %+v", pr)
	}
	// Another client is not affected, and legacy fields are off by default.
	other := testPolicy(t, Config{Layers: p.layerConfig()})
	w, ok = admit(t, other, request("198.51.100.1:1"))
	if !ok || w.Header().Get("X-RateLimit-Limit") != "" {
		t.Errorf("other client: %v, legacy %q", ok, w.Header().Get("X-RateLimit-Limit"))
	}
}

// layerConfig rebuilds the layers of p, sharing its limiters.
func (p *Policy) layerConfig() []Layer {
	var ls []Layer
	for _, l := range p.layers {
		ls = append(ls, Layer{Limiter: l.lim, Key: l.key, Cost: l.cost})
	}
	return ls
}

func itoa(n int64) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int64) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// A layer that still has room does not hold a refused request back, and
// its t is its own reset, not the refusing layer's wait.
func TestRetryAfterIgnoresALayerWithRoom(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // 800 s into an hour
	hourly := clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "hourly", Limit: 100, Window: time.Hour})
	burst := clocked(t, clock, algorithm.TokenBucket{}, core.Policy{Name: "burst", Limit: 1, Window: 4 * time.Second})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: hourly}, {Limiter: burst}}, LegacyHeaders: true})
	admitFirst(t, p)
	clock.Advance(time.Second)
	w := refuseNext(t, p, "a 1-per-4s bucket")
	if ra := w.Header().Get("Retry-After"); ra != "3" {
		t.Fatalf("Retry-After %q, want 3", ra)
	}
	_, params := list(t, w.Header(), "RateLimit")
	if tt := params["hourly"]["t"]; tt != int64(3600-801) {
		t.Errorf("hourly t=%v, want %d: the hour's end, not Retry-After", tt, 3600-801)
	}
	if tt := params["burst"]["t"]; tt != int64(3) {
		t.Errorf("burst t=%v, want 3", tt)
	}
	// The hourly layer was charged for both requests, and the refused
	// one's unit refunded: r=99.
	if r := params["hourly"]["r"]; r != int64(99) {
		t.Errorf("hourly r=%v, want 99 (the refused request's unit refunded)", r)
	}
	if w.Header().Get("X-RateLimit-Remaining") != "0" || w.Header().Get("X-RateLimit-Reset") != "3" {
		t.Errorf("legacy fields %q remaining, reset %q, want the denying layer's 0 and 3",
			w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset"))
	}
	var pr Problem
	_ = json.Unmarshal(w.Body.Bytes(), &pr)
	if len(pr.ViolatedPolicies) != 1 || pr.ViolatedPolicies[0] != "burst" {
		t.Errorf("violated-policies %q, want [burst]", pr.ViolatedPolicies)
	}
	clock.Advance(3 * time.Second)
	if w, ok := admit(t, p, request("203.0.113.7:1")); !ok {
		t.Errorf("retry after Retry-After: %d, want admitted", w.Code)
	}
}

// An earlier layer that admitted a request but kept fewer units than the
// request costs will refuse its retry: Retry-After waits for it, and its
// t is not cut to the refusing layer's.
func TestRetryAfterWaitsForALayerWithoutRoomForTheCost(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_699_999_980, 0)) // on a whole minute
	perIP := clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 5, Window: time.Minute})
	perKey := clocked(t, clock, algorithm.SlidingLog{}, core.Policy{Name: "per-key", Limit: 1, Window: 3 * time.Second})
	// NoRefund: per-ip keeps the units of the refused request.
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: perIP, Weight: 2}, {Limiter: perKey}}, NoRefund: true})
	admitFirst(t, p)
	// per-ip admits the second (5 → 3 → 1) and per-key refuses it: a
	// retry costs 2 at per-ip, which has 1 until its window ends.
	w := refuseNext(t, p, "a 1-per-3s log")
	if ra := w.Header().Get("Retry-After"); ra != "60" {
		t.Errorf("Retry-After %q, want 60 (per-ip has 1 unit of the 2 a retry costs)", ra)
	}
	if got := w.Header().Get("RateLimit"); got != `"per-ip";r=1;t=60, "per-key";r=0;t=3` {
		t.Errorf("RateLimit %q", got)
	}
	clock.Advance(59 * time.Second)
	if w, ok := admit(t, p, request("203.0.113.7:1")); ok || w.Code != http.StatusTooManyRequests {
		t.Errorf("retry a second before Retry-After: %v %d, want 429", ok, w.Code)
	}
	clock.Advance(time.Second)
	if w, ok := admit(t, p, request("203.0.113.7:1")); !ok {
		t.Errorf("retry at Retry-After: %d %s, want admitted", w.Code, w.Body)
	}
}

// An earlier concurrency layer's lease goes back when a later layer
// refuses, so the retry finds its slot free: its reclaim time (LeaseTTL) is
// not a wait, nor is a fail-open layer's.
func TestRetryAfterIgnoresReleasedLeasesAndDegradedLayers(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_699_999_980, 0))
	inflight := clocked(t, clock, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 1, Window: time.Minute})
	open, err := core.New(core.Config{
		Policy:    core.Policy{Name: "open", Limit: 1, Window: time.Hour},
		Algorithm: algorithm.FixedWindow{},
		Store:     downStore{},
		Failure:   core.FailOpen,
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	perKey := clocked(t, clock, algorithm.SlidingLog{}, core.Policy{Name: "per-key", Limit: 1, Window: 3 * time.Second})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: inflight}, {Limiter: open}, {Limiter: perKey}}})
	admitFirst(t, p)
	w := refuseNext(t, p, "a 1-per-3s log")
	if ra := w.Header().Get("Retry-After"); ra != "3" {
		t.Errorf("Retry-After %q, want 3", ra)
	}
	clock.Advance(3 * time.Second)
	if w, ok := admit(t, p, request("203.0.113.7:1")); !ok {
		t.Errorf("retry at Retry-After: %d %s, want admitted", w.Code, w.Body)
	}
}

// downStore is a store whose server is gone.
type downStore struct{}

func (downStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	return &store.Error{Op: "update", Err: errors.New("connection refused")}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second:                          0,
		0:                                     0,
		time.Nanosecond:                       1,
		time.Second:                           1,
		time.Second + time.Nanosecond:         2,
		59*time.Second + 999*time.Millisecond: 60,
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %d, want %d", d, got, want)
		}
	}
}
