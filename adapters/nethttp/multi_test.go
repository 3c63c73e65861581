package nethttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

type tenantKey struct{}

func tenantRequest(peer, tenant string) *http.Request {
	r := request(peer)
	return r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
}

func clockedMulti(t *testing.T, clock core.Clock) *core.Multi {
	t.Helper()
	s := memory.New(&memory.Options{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	m, err := core.NewMulti(core.MultiConfig{Name: "api", Store: s, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var (
	perSecond = func(n, burst int64) core.Limit {
		return core.Limit{Policy: core.Policy{Name: "second", Limit: n, Window: time.Second, Burst: burst}, Algorithm: algorithm.GCRA{}}
	}
	perDay = func(n int64) core.Limit {
		return core.Limit{Policy: core.Policy{Name: "day", Limit: n, Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day}}
	}
)

// A multi-limit layer writes one RateLimit-Policy and one RateLimit item
// per limit, named by the limit; a refusal by the daily limit waits until
// midnight and names the day.
func TestMultiLayerOneItemPerLimit(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 23, 0, 0, 0, time.UTC))
	p := testPolicy(t, Config{Layers: []Layer{{
		Multi:  clockedMulti(t, clock),
		Limits: core.MustLimits(perSecond(10, 20), perDay(3)),
		Key:    Identity(tenantKey{}),
	}}})
	for i := range 3 {
		if w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme")); !ok {
			t.Fatalf("request %d refused: %d %s", i, w.Code, w.Body)
		}
	}
	w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme"))
	if ok || w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th request of a 3-per-day tenant: %d, want 429", w.Code)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"second";q=10;w=1;sluice-burst=20, "day";q=3;w=86400` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	names, params := list(t, w.Header(), "RateLimit")
	if len(names) != 2 || names[0] != "second" || names[1] != "day" {
		t.Fatalf("RateLimit items %v, want second and day", names)
	}
	if params["day"]["r"] != int64(0) || params["day"]["t"] != int64(3600) || params["second"]["r"] != int64(17) {
		t.Errorf("RateLimit %q: want day r=0 t=3600 (midnight), second r=17", w.Header().Values("RateLimit"))
	}
	if ra := w.Header().Get("Retry-After"); ra != "3600" {
		t.Errorf("Retry-After %q, want 3600: the daily limit refused, until midnight", ra)
	}
	var pr Problem
	if err := json.Unmarshal(w.Body.Bytes(), &pr); err != nil || len(pr.ViolatedPolicies) != 1 || pr.ViolatedPolicies[0] != "day" {
		t.Errorf("problem %s: want violated-policies [day]", w.Body)
	}
	clock.Advance(time.Hour)
	if w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme")); !ok {
		t.Errorf("after midnight: %d, want admitted", w.Code)
	}
}

// A tiered layer applies each tenant's plan, per request, and says so in
// RateLimit-Policy.
func TestTieredLayer(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	plans := map[string]string{"big": "pro"}
	tiers, err := core.NewTiers(map[string][]core.Limit{
		"free": {perSecond(1, 2), perDay(5)},
		"pro":  {perSecond(10, 20), perDay(1000)},
	}, "free", func(_ context.Context, id string) (string, error) { return plans[id], nil })
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{Layers: []Layer{{Multi: clockedMulti(t, clock), Tiers: tiers, Key: Identity(tenantKey{})}}})
	count := func(tenant string) (int, http.Header) {
		c := 0
		var h http.Header
		for range 30 {
			w, ok := admit(t, p, tenantRequest("203.0.113.7:1", tenant))
			if ok {
				c++
			}
			h = w.Header()
		}
		return c, h
	}
	if got, h := count("big"); got != 20 || h.Get("RateLimit-Policy") != `"second";q=10;w=1;sluice-burst=20, "day";q=1000;w=86400` {
		t.Errorf("pro tenant: %d admitted at once (want 20), RateLimit-Policy %q", got, h.Get("RateLimit-Policy"))
	}
	if got, h := count("small"); got != 2 || h.Get("RateLimit-Policy") != `"second";q=1;w=1;sluice-burst=2, "day";q=5;w=86400` {
		t.Errorf("free tenant: %d admitted at once (want 2), RateLimit-Policy %q", got, h.Get("RateLimit-Policy"))
	}
}

// RateLimit-Policy lists its items in the order RateLimit does, layer by
// layer, also when a tiered layer sits between two others: a client may
// pair the two fields' items by position.
func TestTieredLayerItemsInLayerOrder(t *testing.T) {
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {perSecond(5, 5), perDay(100)}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	perIP := memLimiter(t, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 10, Window: time.Minute})
	inflight := memLimiter(t, algorithm.Concurrency{}, core.Policy{Name: "inflight", Limit: 3, Window: time.Minute})
	p := testPolicy(t, Config{Layers: []Layer{
		{Limiter: perIP},
		{Multi: clockedMulti(t, nil), Tiers: tiers, Key: Identity(tenantKey{})},
		{Limiter: inflight},
	}})
	w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme"))
	if !ok {
		t.Fatalf("refused: %d %s", w.Code, w.Body)
	}
	names, _ := list(t, w.Header(), "RateLimit")
	policy, _ := list(t, w.Header(), "RateLimit-Policy")
	want := []string{"per-ip", "second", "day", "inflight"}
	if !slices.Equal(names, want) || !slices.Equal(policy, want) {
		t.Errorf("RateLimit items %v and RateLimit-Policy items %v, want both %v", names, policy, want)
	}
}

// A Weight is checked against every tier's quota by NewPolicy, not met as
// a 429 that can never pass on every request of the smaller tier.
func TestTieredLayerWeightWithinEveryTier(t *testing.T) {
	tiers, err := core.NewTiers(map[string][]core.Limit{
		"free": {perSecond(1, 2)},
		"pro":  {perSecond(10, 20)},
	}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPolicy(Config{Layers: []Layer{{Multi: clockedMulti(t, nil), Tiers: tiers, Weight: 5}}})
	if err == nil || !strings.Contains(err.Error(), `tier "free"`) {
		t.Fatalf("a Weight of 5 over a free tier that admits 2 at once: %v; want an error naming the tier", err)
	}
}

// By default a layer that refuses refunds what the earlier layers took:
// one user's refused requests do not spend the quota of the address it
// shares with others. With NoRefund they do.
func TestRefusalRefundsEarlierLayers(t *testing.T) {
	for _, noRefund := range []bool{false, true} {
		clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
		perIP := clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 5, Window: time.Minute})
		perUser := clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-user", Limit: 1, Window: time.Minute})
		p := testPolicy(t, Config{Layers: []Layer{{Limiter: perIP}, {Limiter: perUser, Key: Identity(tenantKey{})}}, NoRefund: noRefund})
		for range 6 {
			admit(t, p, tenantRequest("203.0.113.7:1", "mallory"))
		}
		admitted := 0
		for _, u := range []string{"ann", "bob", "cy", "di"} {
			if _, ok := admit(t, p, tenantRequest("203.0.113.7:1", u)); ok {
				admitted++
			}
		}
		switch {
		case !noRefund && admitted != 4:
			t.Errorf("refunds on: %d of 4 other users admitted after one user's 5 refusals, want 4 (per-ip holds only mallory's 1)", admitted)
		case noRefund && admitted != 0:
			t.Errorf("NoRefund: %d of 4 other users admitted, want 0 (mallory's refusals spent per-ip)", admitted)
		}
	}
}

// A Multi layer that answers a request itself (a cost above what its
// limits admit at once) refunds the earlier layers before it writes their
// fields, so they show what those layers have after it, and its problem
// names the limits the cost exceeds, as its RateLimit items do.
func TestTooCostlyMultiLayer(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	perIP := clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 10, Window: time.Minute})
	ls := core.MustLimits(perSecond(2, 4), perDay(100))
	cost := func(q *Request) int64 {
		if q.URL.Path == "/export" {
			return 50
		}
		return 1
	}
	p := testPolicy(t, Config{Layers: []Layer{{Limiter: perIP}, {Multi: clockedMulti(t, clock), Limits: ls, Cost: cost}}})
	req := func(path string) *http.Request {
		r := tenantRequest("203.0.113.7:1", "ann")
		r.URL.Path = path
		return r
	}
	if _, ok := admit(t, p, req("/cheap")); !ok {
		t.Fatal("a cheap request was refused")
	}
	w, ok := admit(t, p, req("/export"))
	if ok || w.Code != http.StatusTooManyRequests {
		t.Fatalf("a request of 50 units: %d, want 429", w.Code)
	}
	if rl := w.Header().Get(HeaderRateLimit); !strings.HasPrefix(rl, `"per-ip";r=9;`) {
		t.Errorf("RateLimit %q; want per-ip's 9 left: the refused request's unit given back", rl)
	}
	if pr := decodeProblem(t, w); strings.Join(pr.ViolatedPolicies, ",") != "second" {
		t.Errorf("violated-policies %q; want the limit the cost exceeds, second (day admits 100 at once)", pr.ViolatedPolicies)
	}
}

// Retry-After waits for every limit of an earlier multi-limit layer that
// kept fewer units than the request costs, not only for the one with the
// fewest units left: here "short" has none (20 s) and "long" has 1 of the
// 2 a retry costs (an hour), so a retry after 20 s is refused again.
func TestRetryAfterWaitsForEveryLimitOfAMultiLayer(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0).Truncate(time.Hour))
	ls := core.MustLimits(
		core.Limit{Policy: core.Policy{Name: "short", Limit: 4, Window: 20 * time.Second}, Algorithm: algorithm.FixedWindow{}},
		core.Limit{Policy: core.Policy{Name: "long", Limit: 5, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}},
	)
	user := clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "user", Limit: 1, Window: 5 * time.Second})
	p := testPolicy(t, Config{Layers: []Layer{{Multi: clockedMulti(t, clock), Limits: ls, Weight: 2}, {Limiter: user}}, NoRefund: true})
	admitFirst(t, p)
	// The second: short 4 → 2 → 0, long 5 → 3 → 1, and user refuses.
	w := refuseNext(t, p, "a 1-per-5s limit")
	if ra := w.Header().Get("Retry-After"); ra != "3600" {
		t.Errorf("Retry-After %q, want 3600 (long has 1 unit of the 2 a retry costs until its hour ends); RateLimit %q", ra, w.Header().Get("RateLimit"))
	}
}

// A request cancelled while a multi-limit layer's leaky bucket holds it in
// its queue gives its place back, though no layer comes after.
func TestMultiLayerCancelledWhileQueued(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	m := clockedMulti(t, clock)
	ls := core.MustLimits(
		core.Limit{Policy: core.Policy{Name: "queue", Limit: 1, Window: time.Minute, MaxDelay: 10 * time.Minute}, Algorithm: algorithm.LeakyBucket{}},
		perDay(100))
	p := testPolicy(t, Config{Layers: []Layer{{Multi: m, Limits: ls, Key: Identity(tenantKey{})}}})
	cancelWhileQueued(t, p, m, ls)
}

// cancelWhileQueued sends acme two requests through p, whose only layer
// queues (ls, a leaky bucket of one a minute and a day of 100), cancels
// the second while it waits, and checks that it gave back its place and
// its day's unit.
func cancelWhileQueued(t *testing.T, p *Policy, m *core.Multi, ls *core.Limits) {
	t.Helper()
	if w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme")); !ok {
		t.Fatalf("first request: %d %s", w.Code, w.Body)
	}
	r := tenantRequest("203.0.113.7:1", "acme")
	ctx, cancel := context.WithCancel(r.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	w := httptest.NewRecorder()
	if a, ok := p.Admit(w, r.WithContext(ctx), "", nil); ok {
		a.Done()
		t.Fatal("a request cancelled while queued was admitted")
	}
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	d, states, err := m.Allow(context.Background(), KeyIdentity("acme"), ls, nil)
	if err != nil || !d.Allowed {
		t.Fatalf("next request: %+v %v", d, err)
	}
	if d.Delay != time.Minute {
		t.Errorf("next request's Delay %v, want 1m0s: the cancelled request kept its place in the queue", d.Delay)
	}
	if day := states[1]; day.Remaining != 98 {
		t.Errorf("the day limit has %d left, want 98: the cancelled request's unit was kept", day.Remaining)
	}
}

// A tiered layer that Tiers.Set gives a leaky bucket after NewPolicy
// queues as one that had it from the start: a request cancelled while it
// waits gives its place, and its other limits' units, back.
func TestTiersSetQueueCancelledGivesBack(t *testing.T) {
	clock := core.NewManualClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	m := clockedMulti(t, clock)
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {perDay(100)}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{Layers: []Layer{{Multi: m, Tiers: tiers, Key: Identity(tenantKey{})}}})
	queue := core.Limit{Policy: core.Policy{Name: "queue", Limit: 1, Window: time.Minute, MaxDelay: 10 * time.Minute}, Algorithm: algorithm.LeakyBucket{}}
	if err := tiers.Set(map[string][]core.Limit{"free": {queue, perDay(100)}}); err != nil {
		t.Fatal(err)
	}
	cancelWhileQueued(t, p, m, tiers.Tier("free"))
}

// A limit's name is a RateLimit item: Tiers.Set refuses one that another
// layer of a policy over the tiers already names, as NewPolicy does.
func TestTiersSetRefusesAnotherLayersName(t *testing.T) {
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {perSecond(1, 2)}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	perIP := memLimiter(t, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 10, Window: time.Minute})
	testPolicy(t, Config{Layers: []Layer{{Limiter: perIP}, {Multi: clockedMulti(t, nil), Tiers: tiers, Key: Identity(tenantKey{})}}})
	clash := core.Limit{Policy: core.Policy{Name: "per-ip", Limit: 2, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}}
	if err := tiers.Set(map[string][]core.Limit{"free": {perSecond(1, 2), clash}}); err == nil || !strings.Contains(err.Error(), `"per-ip"`) {
		t.Fatalf("Set with a limit named like another layer: %v; want an error naming it", err)
	}
	if n := tiers.Tier("free").Len(); n != 1 {
		t.Errorf("the refused Set changed the table: %d limits, want 1", n)
	}
	if err := tiers.Set(map[string][]core.Limit{"free": {perSecond(2, 4)}}); err != nil {
		t.Errorf("a Set without a clash: %v", err)
	}
}

// A policy keeps what it learnt of a tier table only for the tables in
// use: Sets of new tables, a request between each, leave its memory flat.
func TestTiersSetKeepsMemoryFlat(t *testing.T) {
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {perSecond(1000, 2000)}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{Layers: []Layer{{Multi: clockedMulti(t, nil), Tiers: tiers, Key: Identity(tenantKey{})}}})
	for i := range 2000 {
		if err := tiers.Set(map[string][]core.Limit{"free": {perSecond(1000+int64(i%7), 2000)}}); err != nil {
			t.Fatal(err)
		}
		if w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme")); !ok {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
	}
	n := 0
	p.sets.Range(func(any, any) bool { n++; return true })
	if n > maxSets {
		t.Errorf("the policy holds %d tables' items after 2000 Sets, want at most %d", n, maxSets)
	}
}

// A tier that cannot be resolved (the resolver's error: a billing service
// down) answers 503, and the Multi's Observer hears it as a decision
// returned as an error, so that the metrics count what the clients saw
// (an alert on failed decisions fires during such an outage).
func TestTierResolverErrorObserved(t *testing.T) {
	var events []core.Event
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	m, err := core.NewMulti(core.MultiConfig{Name: "api", Store: s, Observer: func(e core.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	billing := errors.New("billing unreachable")
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {perSecond(1, 2)}}, "free",
		func(context.Context, string) (string, error) { return "", billing })
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{Layers: []Layer{{Multi: m, Tiers: tiers, Key: Identity(tenantKey{})}}})
	w, ok := admit(t, p, tenantRequest("203.0.113.7:1", "acme"))
	if ok || w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a tier that cannot be resolved: admitted %v, status %d; want 503", ok, w.Code)
	}
	if len(events) != 1 || !errors.Is(events[0].Err, billing) || events[0].Policy != "api" || events[0].Decision.Allowed {
		t.Fatalf("the Observer heard %+v; want one event of policy \"api\" with the resolver's error", events)
	}
}

// A tiered layer that resolved its tier and then did not decide (a cost
// above its quota, a store that failed) lists its limits in
// RateLimit-Policy, as a layer without tiers does, so that the 429's
// violated-policies names items the client can pair: only a tier never
// resolved leaves its layer out.
func TestTieredLayerUndecidedListsItsLimits(t *testing.T) {
	tiers, err := core.NewTiers(map[string][]core.Limit{"free": {perSecond(3, 3)}}, "free", nil)
	if err != nil {
		t.Fatal(err)
	}
	perIP := testLimiter(t, "per-ip", 100, time.Minute)
	costly := testPolicy(t, Config{Layers: []Layer{{Limiter: perIP}, {Multi: clockedMulti(t, nil), Tiers: tiers, Key: Identity(tenantKey{}),
		Cost: func(*Request) int64 { return 5 }}}})
	w, ok := admit(t, costly, tenantRequest("203.0.113.7:1", "acme"))
	if ok || w.Code != http.StatusTooManyRequests {
		t.Fatalf("a cost of 5 over a tier of 3: %d, want 429", w.Code)
	}
	if got, want := w.Header().Get(HeaderRateLimitPolicy), `"per-ip";q=100;w=60, "second";q=3;w=1`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if pr := decodeProblem(t, w); strings.Join(pr.ViolatedPolicies, ",") != "second" {
		t.Errorf("violated-policies %q, want second", pr.ViolatedPolicies)
	}
	if rl := w.Header().Get(HeaderRateLimit); strings.Contains(rl, "second") {
		t.Errorf("RateLimit %q has an item for a layer that did not decide", rl)
	}

	m, err := core.NewMulti(core.MultiConfig{Name: "api", Store: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	down := testPolicy(t, Config{Layers: []Layer{{Limiter: perIP}, {Multi: m, Tiers: tiers, Key: Identity(tenantKey{})}}})
	w, ok = admit(t, down, tenantRequest("203.0.113.7:1", "acme"))
	if ok || w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a tiered layer over a store that is down: %d, want 503", w.Code)
	}
	if got, want := w.Header().Get(HeaderRateLimitPolicy), `"per-ip";q=100;w=60, "second";q=3;w=1`; got != want {
		t.Errorf("503: RateLimit-Policy %q, want %q", got, want)
	}
	// The 503 names the layer by its limits, the names RateLimit-Policy
	// lists, not by the Multi's name, which no item carries; so does a
	// layer of fixed Limits.
	if pr := decodeProblem(t, w); strings.Join(pr.ViolatedPolicies, ",") != "second" {
		t.Errorf("503: violated-policies %q, want the tier's limit, second", pr.ViolatedPolicies)
	}
	fixed := testPolicy(t, Config{Layers: []Layer{{Multi: m, Limits: core.MustLimits(perSecond(3, 3), perDay(10))}}})
	w, _ = admit(t, fixed, tenantRequest("203.0.113.7:1", "acme"))
	if pr := decodeProblem(t, w); w.Code != http.StatusServiceUnavailable || strings.Join(pr.ViolatedPolicies, ",") != "second,day" {
		t.Errorf("503 of a layer of fixed limits: %d, violated-policies %q; want its limits, second and day", w.Code, pr.ViolatedPolicies)
	}
}
