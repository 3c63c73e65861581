package nethttp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

func memLimiter(t *testing.T, alg core.Algorithm, p core.Policy) *core.Limiter {
	t.Helper()
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func decodeProblem(t *testing.T, w *httptest.ResponseRecorder) Problem {
	t.Helper()
	var pr Problem
	if err := json.Unmarshal(w.Body.Bytes(), &pr); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return pr
}

func TestCancelledWhileQueued(t *testing.T) {
	queue := memLimiter(t, algorithm.LeakyBucket{}, core.Policy{Name: "queue", Limit: 1, Window: time.Minute, MaxDelay: 10 * time.Minute})
	inflight := memLimiter(t, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 1, Window: time.Minute})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: inflight}, {Limiter: queue}}})

	// The first request empties the bucket; the second would wait a minute.
	w, ok := admit(t, p, request("203.0.113.7:1"))
	if !ok {
		t.Fatalf("first request: %d", w.Code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := request("203.0.113.7:1").WithContext(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	w = httptest.NewRecorder()
	a, ok := p.Admit(w, r, "", nil)
	if ok {
		a.Done()
		t.Fatal("a request cancelled while queued was admitted")
	}
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", w.Code)
	}
	if pr := decodeProblem(t, w); pr.Status != 503 || pr.Type != "about:blank" {
		t.Errorf("problem %+v", pr)
	}
	// Its concurrency lease was given back when it gave up.
	lease, d, err := inflight.Acquire(context.Background(), keyOf("203.0.113.7/32"))
	if err != nil || !d.Allowed {
		t.Fatalf("lease after the cancelled request: %+v %v (the lease was kept)", d, err)
	}
	_ = lease.Release(context.Background())
}

func TestLaterDenialReleasesEarlierLease(t *testing.T) {
	inflight := memLimiter(t, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 1, Window: time.Minute})
	rate := memLimiter(t, algorithm.SlidingLog{}, core.Policy{Name: "rate", Limit: 1, Window: time.Minute})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: inflight}, {Limiter: rate}}})
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		a, ok := p.Admit(w, request("203.0.113.7:1"), "", nil)
		got := w.Code
		if ok {
			a.Done()
		}
		if got != want {
			t.Fatalf("request %d: %d, want %d", i, got, want)
		}
		if i > 0 {
			// Refused by "rate", not "inflight": the refused requests did
			// not keep the only lease.
			if pr := decodeProblem(t, w); len(pr.ViolatedPolicies) != 1 || pr.ViolatedPolicies[0] != "rate" {
				t.Errorf("request %d: violated %q, want [rate]", i, pr.ViolatedPolicies)
			}
		}
	}
}

// A later layer's application code (its CostFunc) panics: the lease an
// earlier concurrency layer took goes back, and the panic goes on.
func TestPanicInLaterLayerReleasesLease(t *testing.T) {
	inflight := memLimiter(t, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 1, Window: time.Minute})
	rate := memLimiter(t, algorithm.GCRA{}, core.Policy{Name: "rate", Limit: 100, Window: time.Minute})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: inflight}, {Limiter: rate, Cost: func(*Request) int64 { panic("cost") }}}})
	func() {
		defer func() {
			if r := recover(); r != "cost" {
				t.Fatalf("recovered %v, want the CostFunc's panic", r)
			}
		}()
		p.Admit(httptest.NewRecorder(), request("203.0.113.7:1"), "", nil)
		t.Fatal("Admit returned; want the CostFunc's panic")
	}()
	lease, d, err := inflight.Acquire(context.Background(), keyOf("203.0.113.7/32"))
	if err != nil || !d.Allowed {
		t.Fatalf("lease after the panic: %+v %v (the lease was kept)", d, err)
	}
	_ = lease.Release(context.Background())
}

func TestHeldLeaseRefusesUntilDone(t *testing.T) {
	inflight := memLimiter(t, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 2, Window: time.Minute})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: inflight}}})
	var held []*Admission
	for i := 0; i < 2; i++ {
		w := httptest.NewRecorder()
		a, ok := p.Admit(w, request("203.0.113.7:1"), "", nil)
		if !ok || a == nil {
			t.Fatalf("request %d: %v %d", i, ok, w.Code)
		}
		held = append(held, a)
	}
	if w, ok := admit(t, p, request("203.0.113.7:1")); ok || w.Code != http.StatusTooManyRequests {
		t.Fatalf("third concurrent request: %v %d, want 429", ok, w.Code)
	}
	held[0].Done()
	if w, ok := admit(t, p, request("203.0.113.7:1")); !ok {
		t.Fatalf("after one Done: %d, want admitted", w.Code)
	}
	held[1].Done()
	var nilAdmission *Admission
	nilAdmission.Done() // documented as safe
}

func TestCancelledBeforeTheStoreAnswers(t *testing.T) {
	// A request whose context is done while the store is asked is told so,
	// not blamed on the store.
	l, err := core.New(core.Config{
		Policy:    core.Policy{Name: "slow", Limit: 1, Window: time.Minute},
		Algorithm: algorithm.FixedWindow{},
		Store:     blockingStore{},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: l}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w, ok := admit(t, p, request("203.0.113.7:1").WithContext(ctx))
	if ok || w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%v %d, want 503", ok, w.Code)
	}
	if pr := decodeProblem(t, w); pr.Type != "about:blank" {
		t.Errorf("problem type %q, want about:blank (cancelled)", pr.Type)
	}
	// With a live context, the store's deadline makes it a capacity problem.
	w, ok = admit(t, p, request("203.0.113.7:1"))
	if ok || w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%v %d, want 503", ok, w.Code)
	}
	if pr := decodeProblem(t, w); pr.Type != ProblemReducedCapacity {
		t.Errorf("problem type %q, want %q", pr.Type, ProblemReducedCapacity)
	}
}

// blockingStore waits for the call's deadline, as a hung server does.
type blockingStore struct{}

func (blockingStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	<-ctx.Done()
	return &store.Error{Op: "update", Err: ctx.Err()}
}

func TestSkipFunc(t *testing.T) {
	l := testLimiter(t, "api", 1, time.Minute)
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: l}}, Skip: func(q *Request) bool {
		return q.Value(adminKey{}) == true
	}})
	admin := request("203.0.113.7:1")
	admin = admin.WithContext(context.WithValue(admin.Context(), adminKey{}, true))
	for i := 0; i < 3; i++ {
		if w, ok := admit(t, p, admin); !ok || w.Header().Get("RateLimit") != "" {
			t.Fatalf("admin %d: %v %q", i, ok, w.Header())
		}
	}
	if _, ok := admit(t, p, request("203.0.113.7:1")); !ok {
		t.Fatal("first ordinary request refused")
	}
	if _, ok := admit(t, p, request("203.0.113.7:1")); ok {
		t.Fatal("second ordinary request admitted")
	}
}

type adminKey struct{}

func TestKeyFuncs(t *testing.T) {
	r := request("203.0.113.7:1")
	r.Header.Set("X-Api-Key", "k1")
	r = r.WithContext(context.WithValue(r.Context(), adminKey{}, stringer("s1")))
	p := testPolicy(t, Config{})
	q := p.newRequest(r, "/items/{id}", nil)
	defer freeRequest(q)
	for name, c := range map[string]struct {
		f    KeyFunc
		want string
	}{
		"header":           {Header("x-api-key"), "k1"},
		"missing header":   {Header("X-Other"), ""},
		"stringer":         {Identity(adminKey{}), "s1"},
		"missing identity": {Identity("nobody"), ""},
		"route":            {Route, "GET /items/{id}"},
	} {
		if got := c.f(q); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	q.Route = ""
	if got := Route(q); got != "" {
		t.Errorf("Route without a route: %q", got)
	}
	l := &layer{key: Header("X-Other")}
	if got := l.identity(q); got != keyOf("203.0.113.7/32") {
		t.Errorf("missing key falls back to %q", got)
	}
	l.key = Header("X-Api-Key")
	if got := l.identity(q); got != "k:k1" {
		t.Errorf("key identity %q", got)
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

func TestIdentityValueTypes(t *testing.T) {
	p := testPolicy(t, Config{})
	for _, c := range []struct {
		v    any
		want string
	}{
		{"u", "u"}, {[]byte("b"), "b"}, {42, "42"}, {int64(-7), "-7"}, {uint64(9), "9"}, {stringer("s"), "s"},
		{int8(-8), "-8"}, {int16(16), "16"}, {int32(-32), "-32"}, {uint(7), "7"}, {uint8(8), "8"}, {uint16(16), "16"}, {uint32(32), "32"},
		{3.5, ""}, {struct{}{}, ""}, {nil, ""},
	} {
		r := request("203.0.113.7:1")
		r = r.WithContext(context.WithValue(r.Context(), adminKey{}, c.v))
		q := p.newRequest(r, "", nil)
		if got := Identity(adminKey{})(q); got != c.want {
			t.Errorf("Identity of %#v: %q, want %q", c.v, got, c.want)
		}
		freeRequest(q)
	}
}

// A group's policy and a route's policy stack: both are checked, outer
// first, and the response lists the items of both as one Structured Field
// List over two field lines.
func TestStackedPolicies(t *testing.T) {
	group := testPolicy(t, Config{Layers: []Layer{{Limiter: testLimiter(t, "group", 10, time.Minute)}}})
	route := testPolicy(t, Config{Layers: []Layer{{Limiter: testLimiter(t, "route", 1, time.Minute)}}})
	var calls int
	h := Middleware(group)(Middleware(route)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ })))
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request("203.0.113.7:1"))
		if w.Code != want {
			t.Fatalf("request %d: %d, want %d", i, w.Code, want)
		}
		names, params := list(t, w.Header(), "RateLimit")
		if len(names) != 2 || names[0] != "group" || names[1] != "route" {
			t.Fatalf("request %d: RateLimit items %q, want group and route", i, names)
		}
		if r := params["group"]["r"]; r != int64(9-i) {
			t.Errorf("request %d: group r=%v, want %d", i, r, 9-i)
		}
		if pol, _ := list(t, w.Header(), "RateLimit-Policy"); len(pol) != 2 {
			t.Errorf("request %d: RateLimit-Policy items %q", i, pol)
		}
	}
	if calls != 1 {
		t.Errorf("handler ran %d times, want 1", calls)
	}
}

// A Policy NewPolicy did not make (nil, or a zero value) answers every
// request with a 500 problem and never runs the handler: a server whose
// limits were never wired must not serve unlimited, nor panic per request.
func TestPolicyNotMadeRefuses(t *testing.T) {
	for name, p := range map[string]*Policy{"nil": nil, "zero": {}} {
		ran := false
		h := Middleware(p)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("%s Policy: a request panicked: %v", name, v)
				}
			}()
			h.ServeHTTP(w, request("203.0.113.7:1"))
		}()
		if ran || w.Code != http.StatusInternalServerError {
			t.Errorf("%s Policy: status %d, handler ran %v; want 500 and no handler", name, w.Code, ran)
		}
		if pr := decodeProblem(t, w); pr.Status != 500 || !strings.Contains(pr.Detail, "not configured") {
			t.Errorf("%s Policy: problem %+v", name, pr)
		}
	}
}

// KeyIdentity names the identity a layer counts a key under, so that the
// application can Reset it (or read it) through the layer's Limiter.
func TestKeyIdentityResetsTheDoorsCount(t *testing.T) {
	l := memLimiter(t, algorithm.FixedWindow{}, core.Policy{Name: "per-user", Limit: 1, Window: time.Hour})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: l, Key: Header("X-User")}}})
	req := func() *http.Request {
		r := request("203.0.113.7:1")
		r.Header.Set("X-User", "u1")
		return r
	}
	if w, ok := admit(t, p, req()); !ok {
		t.Fatalf("first request: %d", w.Code)
	}
	if w, ok := admit(t, p, req()); ok || w.Code != http.StatusTooManyRequests {
		t.Fatalf("second request: %d; want 429", w.Code)
	}
	if err := l.Reset(context.Background(), KeyIdentity("u1")); err != nil {
		t.Fatal(err)
	}
	if w, ok := admit(t, p, req()); !ok {
		t.Fatalf("after Reset(KeyIdentity(\"u1\")): %d; want the count gone", w.Code)
	}
}

// A request cancelled while it waits in a leaky bucket's queue gives its
// place back, whether the bucket is the last layer or not: the next
// request waits for the places still taken, not for the cancelled one.
func TestCancelledWhileQueuedGivesPlaceBack(t *testing.T) {
	for _, last := range []bool{true, false} {
		t.Run(map[bool]string{true: "last layer", false: "before another"}[last], func(t *testing.T) {
			clk := core.NewManualClock(time.Unix(1_700_000_000, 0))
			st := memory.New(nil)
			t.Cleanup(func() { _ = st.Close() })
			queue, err := core.New(core.Config{Policy: core.Policy{Name: "queue", Limit: 1, Window: time.Minute, MaxDelay: 10 * time.Minute},
				Algorithm: algorithm.LeakyBucket{}, Store: st, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			layers := []Layer{{Limiter: queue}}
			rate := memLimiter(t, algorithm.FixedWindow{}, core.Policy{Name: "rate", Limit: 100, Window: time.Hour})
			if !last {
				layers = append(layers, Layer{Limiter: rate})
			}
			p := testPolicy(t, Config{Layers: layers})
			if w, ok := admit(t, p, request("203.0.113.7:1")); !ok {
				t.Fatalf("first request: %d", w.Code)
			}
			// The second is queued for a minute, and gives up.
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			w := httptest.NewRecorder()
			if a, ok := p.Admit(w, request("203.0.113.7:1").WithContext(ctx), "", nil); ok {
				a.Done()
				t.Fatal("a request cancelled while queued was admitted")
			}
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503", w.Code)
			}
			// Its place is free again: the next request waits one interval,
			// behind the first, not two.
			d, err := queue.Allow(context.Background(), keyOf("203.0.113.7/32"))
			if err != nil || !d.Allowed {
				t.Fatalf("next request: %+v %v", d, err)
			}
			if d.Delay != time.Minute {
				t.Errorf("next request's Delay %v, want 1m0s: the cancelled request kept its place in the queue", d.Delay)
			}
			if last {
				return
			}
			// And its unit of the layer after the queue, which had admitted
			// it before it waited.
			if d, err := rate.Allow(context.Background(), keyOf("203.0.113.7/32")); err != nil || d.Remaining != 98 {
				t.Errorf("the layer after the queue: %+v %v; want 98 left (the first request's and this one's taken)", d, err)
			}
		})
	}
}

// The deny cache guards a layer that a later one follows (which the door
// charges with a receipt) as it guards the last: a flood from one client
// costs that layer's store one call, not one a request.
func TestDenyCacheGuardsAnEarlierLayer(t *testing.T) {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	var fromStore, fromCache int
	ip, err := core.New(core.Config{
		Policy: core.Policy{Name: "ip", Limit: 2, Window: time.Minute}, Algorithm: algorithm.FixedWindow{},
		Store:     struct{ store.Store }{mem}, // a store that is not in process, as a network one
		DenyCache: &core.DenyCacheOptions{},
		Observer: func(e core.Event) {
			switch {
			case e.Decision.Allowed:
			case e.DenyCached:
				fromCache++
			default:
				fromStore++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	user := memLimiter(t, algorithm.GCRA{}, core.Policy{Name: "user", Limit: 100, Window: time.Minute})
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: ip}, {Limiter: user}}})
	for i := range 10 {
		w, ok := admit(t, p, request("203.0.113.7:1"))
		if want := i < 2; ok != want {
			t.Fatalf("request %d: admitted %v (%d), want %v", i, ok, w.Code, want)
		}
	}
	if fromStore != 1 || fromCache != 7 {
		t.Errorf("refusals: %d by the store, %d by the deny cache; want 1 and 7", fromStore, fromCache)
	}
}

// passedDeadline is a context whose deadline has passed and whose Err does
// not say so yet, as a request's is for an instant after its deadline.
type passedDeadline struct {
	context.Context
	dl time.Time
}

func (c passedDeadline) Deadline() (time.Time, bool) { return c.dl, true }

// A request whose own deadline passed while the store was failing gets the
// cancelled request's answer, not the store's, though its context has not
// said so yet: core reports the deadline as soon as it has passed.
func TestOwnDeadlineIsNotTheStores(t *testing.T) {
	l, err := core.New(core.Config{Policy: core.Policy{Name: "api", Limit: 10, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: l}}})
	r := request("203.0.113.7:1")
	w := httptest.NewRecorder()
	if a, ok := p.Admit(w, r.WithContext(passedDeadline{r.Context(), time.Now()}), "", nil); ok {
		a.Done()
		t.Fatal("admitted over a store that is down, failing closed")
	}
	if pr := decodeProblem(t, w); w.Code != http.StatusServiceUnavailable || pr.Type != "about:blank" {
		t.Errorf("%d %+v, want 503 about:blank (the cancelled request's problem)", w.Code, pr)
	}
}
