package sluicegrpc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The retry delay is the longest wait over every layer the retry could not
// pass now: a per-second layer refuses, but the per-minute layer before it
// has no unit left either, so the call must wait for that one. (NoRefund:
// a refund would give the minute layer its unit back.)
func TestRetryDelayCoversEveryLayer(t *testing.T) {
	clk := core.NewManualClock(epoch.Add(10 * time.Second))
	st := memStore(t, clk)
	minute := newLimiter(t, core.Config{Policy: core.Policy{Name: "minute", Limit: 2, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: st, Clock: clk})
	second := newLimiter(t, core.Config{Policy: core.Policy{Name: "second", Limit: 1, Window: time.Second}, Algorithm: algorithm.GCRA{}, Store: st, Clock: clk})
	svc := &service{}
	c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: minute}, {Limiter: second}}, NoRefund: true}))

	r := unary(t, c, callCtx(t), nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got, want := one(r.header, sluicegrpc.MetadataRateLimitPolicy), `"minute";q=2;w=60, "second";q=1;w=1`; got != want {
		t.Errorf("ratelimit-policy %q, want %q", got, want)
	}
	if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"minute";r=1;t=50, "second";r=0;t=1`; got != want {
		t.Errorf("ratelimit %q, want %q", got, want)
	}
	if len(r.trailer) != 0 {
		t.Errorf("an admitted call has trailers %v, want none", r.trailer)
	}

	r = unary(t, c, callCtx(t), nil)
	if r.code() != codes.ResourceExhausted {
		t.Fatalf("%v, want ResourceExhausted", r.err)
	}
	if ri, ok := r.retryInfo(); !ok || ri != 50*time.Second {
		t.Errorf("RetryInfo %v (present %v), want 50s: the minute layer has no unit left until its window ends", ri, ok)
	}
	if v := r.violated(); len(v) != 1 || v[0] != "second" {
		t.Errorf("QuotaFailure subjects %v, want [second]", v)
	}
	for name, md := range map[string]metadata.MD{"header": r.header, "trailer": r.trailer} {
		if got, want := one(md, sluicegrpc.MetadataRetryAfter), "50"; got != want {
			t.Errorf("%s retry-after %q, want %q", name, got, want)
		}
		if got, want := one(md, sluicegrpc.MetadataRateLimit), `"minute";r=0;t=50, "second";r=0;t=1`; got != want {
			t.Errorf("%s ratelimit %q, want %q", name, got, want)
		}
		if got, want := one(md, sluicegrpc.MetadataRateLimitPolicy), `"minute";q=2;w=60, "second";q=1;w=1`; got != want {
			t.Errorf("%s ratelimit-policy %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(status.Convert(r.err).Message(), "/grpc.testing.TestService/UnaryCall") {
		t.Errorf("message %q does not name the method", status.Convert(r.err).Message())
	}
	// A second later the per-second layer would pass, but the minute layer
	// refuses: the first wait was the honest one.
	clk.Advance(time.Second)
	if r := unary(t, c, callCtx(t), nil); r.code() != codes.ResourceExhausted {
		t.Fatalf("after 1s: %v, want still refused", r.err)
	}
	clk.Set(epoch.Add(time.Minute))
	if r := unary(t, c, callCtx(t), nil); r.err != nil {
		t.Fatalf("after the wait: %v", r.err)
	}
	if got := svc.unaryRuns.Load(); got != 2 {
		t.Errorf("handler ran %d times, want 2", got)
	}
}

// A call a later layer refuses gives the earlier layers their units back,
// as the HTTP policy does: a client refused per user keeps the quota of
// the address it shares. NoRefund keeps the units taken. The retry delay
// then waits only for the refusing layer.
func TestRefusalRefundsEarlierLayers(t *testing.T) {
	for _, c := range []struct {
		noRefund bool
		ipLeft   string // the ip layer's item after one admission and three refusals
		retry    time.Duration
	}{
		{false, `"ip";r=9;t=60, "user";r=0;t=60`, 60 * time.Second},
		{true, `"ip";r=6;t=60, "user";r=0;t=60`, 60 * time.Second},
	} {
		t.Run(fmt.Sprintf("NoRefund=%v", c.noRefund), func(t *testing.T) {
			clk := core.NewManualClock(epoch)
			st := memStore(t, clk)
			ip := newLimiter(t, core.Config{Policy: core.Policy{Name: "ip", Limit: 10, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: st, Clock: clk})
			user := newLimiter(t, core.Config{Policy: core.Policy{Name: "user", Limit: 1, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: st, Clock: clk})
			svc := &service{}
			tenant := func(*sluicegrpc.Call) string { return "tenant" }
			cl := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: ip, Key: tenant}, {Limiter: user}}, NoRefund: c.noRefund}))
			if r := unary(t, cl, callCtx(t), nil); r.err != nil {
				t.Fatal(r.err)
			}
			var r reply
			for range 3 {
				if r = unary(t, cl, callCtx(t), nil); r.code() != codes.ResourceExhausted {
					t.Fatalf("%v, want ResourceExhausted", r.err)
				}
			}
			if got := one(r.trailer, sluicegrpc.MetadataRateLimit); got != c.ipLeft {
				t.Errorf("ratelimit %q, want %q", got, c.ipLeft)
			}
			if ri, ok := r.retryInfo(); !ok || ri != c.retry {
				t.Errorf("RetryInfo %v (present %v), want %v", ri, ok, c.retry)
			}
			// What the store holds, read by a decision of its own: 10
			// less the units kept.
			d, err := ip.Allow(context.Background(), sluicegrpc.KeyIdentity("tenant")) // the KeyFunc's identity
			if err != nil {
				t.Fatal(err)
			}
			left := map[bool]int64{false: 8, true: 5}[c.noRefund]
			if !d.Allowed || d.Remaining != left {
				t.Errorf("the ip layer's next decision %+v, want admitted with %d left", d, left)
			}
		})
	}
}

// A cost function reads the unary request; a cost above the quota can
// never be admitted, so it is refused without a RetryInfo, and nothing is
// charged.
func TestCost(t *testing.T) {
	clk := core.NewManualClock(epoch)
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "bytes", Limit: 10, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: memStore(t, clk), Clock: clk})
	cost := func(c *sluicegrpc.Call) int64 {
		if req, ok := c.Request.(*testpb.SimpleRequest); ok {
			return int64(req.GetResponseSize())
		}
		return 1
	}
	svc := &service{}
	c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Cost: cost}}}))

	r := unary(t, c, callCtx(t), &testpb.SimpleRequest{ResponseSize: 11})
	if r.code() != codes.ResourceExhausted {
		t.Fatalf("cost 11 of 10: %v, want ResourceExhausted", r.err)
	}
	if ri, ok := r.retryInfo(); ok {
		t.Errorf("RetryInfo %v on a call that can never be admitted", ri)
	}
	if v := one(r.header, sluicegrpc.MetadataRetryAfter); v != "" {
		t.Errorf("retry-after %q on a call that can never be admitted", v)
	}
	r = unary(t, c, callCtx(t), &testpb.SimpleRequest{ResponseSize: 7})
	if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"bytes";r=3;t=60`; r.err != nil || got != want {
		t.Fatalf("cost 7: %v, ratelimit %q, want admitted with %q", r.err, got, want)
	}
	// A cost below 1 is charged as 1.
	r = unary(t, c, callCtx(t), &testpb.SimpleRequest{ResponseSize: -5})
	if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"bytes";r=2;t=60`; r.err != nil || got != want {
		t.Fatalf("cost -5: %v, ratelimit %q, want admitted with %q", r.err, got, want)
	}
	// A stream has no request at admission: cost reads nil.
	s, r := open(t, c)
	if s == nil {
		t.Fatal(r.err)
	}
	s.close(t)
	if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"bytes";r=1;t=60`; got != want {
		t.Errorf("stream: ratelimit %q, want %q", got, want)
	}
}

// A store that cannot decide: failing closed, a call gets Unavailable and
// its handler never runs; failing open, it is admitted, and the response
// states the policy but no counts, since nothing is known about them.
func TestStoreFailure(t *testing.T) {
	for _, tc := range []struct {
		mode core.FailureMode
		want codes.Code
	}{{core.FailClosed, codes.Unavailable}, {core.FailOpen, codes.OK}} {
		t.Run(fmt.Sprint(tc.want), func(t *testing.T) {
			for _, alg := range []core.Algorithm{algorithm.GCRA{}, algorithm.Concurrency{}} {
				fs := &failingStore{}
				lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "api", Limit: 5, Window: time.Minute}, Algorithm: alg, Store: fs, Failure: tc.mode})
				svc := &service{}
				c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}}))
				r := unary(t, c, callCtx(t), nil)
				_, sr := open(t, c)
				for name, r := range map[string]reply{"unary": r, "stream": sr} {
					if r.code() != tc.want {
						t.Errorf("%s %s: %v, want %v", alg.Name(), name, r.err, tc.want)
					}
					if _, ok := r.retryInfo(); ok {
						t.Errorf("%s %s: a RetryInfo, but nobody knows when the store is back", alg.Name(), name)
					}
					if v := one(r.header, sluicegrpc.MetadataRateLimit); v != "" {
						t.Errorf("%s %s: ratelimit %q, want none", alg.Name(), name, v)
					}
					if v := one(r.header, sluicegrpc.MetadataRateLimitPolicy); tc.want == codes.OK && v != `"api";q=5;w=60` && v != `"api";q=5;qu="concurrent-requests"` {
						t.Errorf("%s %s: ratelimit-policy %q", alg.Name(), name, v)
					}
				}
				runs := svc.unaryRuns.Load() + svc.streamRuns.Load()
				if want := map[codes.Code]int64{codes.OK: 2, codes.Unavailable: 0}[tc.want]; runs != want {
					t.Errorf("%s: handlers ran %d times, want %d", alg.Name(), runs, want)
				}
				if fs.calls.Load() == 0 {
					t.Errorf("%s: the store was never asked", alg.Name())
				}
			}
		})
	}
}

// A handler that panics still gives its concurrency lease back: the panic
// goes on up to a recovery interceptor chained before the policy.
func TestLeaseReleasedOnPanic(t *testing.T) {
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "one", Limit: 1, Window: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: memStore(t, nil)})
	p := sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}})
	recovery := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (_ any, err error) {
		defer func() {
			if v := recover(); v != nil {
				err = status.Errorf(codes.Internal, "panic: %v", v)
			}
		}()
		return h(ctx, req)
	}
	svc := &service{onUnary: func(_ context.Context, req *testpb.SimpleRequest) {
		if req.GetFillUsername() {
			panic("handler bug")
		}
	}}
	c := serve(t, svc, grpc.ChainUnaryInterceptor(recovery, sluicegrpc.UnaryServerInterceptor(p)))
	for i := range 3 {
		if r := unary(t, c, callCtx(t), &testpb.SimpleRequest{FillUsername: true}); r.code() != codes.Internal {
			t.Fatalf("panicking call %d: %v, want the recovered Internal (a lease still held would refuse it)", i, r.err)
		}
	}
	if r := unary(t, c, callCtx(t), nil); r.err != nil {
		t.Fatalf("after the panics: %v, want admitted", r.err)
	}
}

// A leaky-bucket layer admits a call with a Delay: the handler starts after
// it.
func TestLeakyBucketDelay(t *testing.T) {
	clk := core.NewManualClock(epoch)
	// One unit per 200ms, a burst of 1, and up to a second of queue.
	leaky := newLimiter(t, core.Config{Policy: core.Policy{Name: "queue", Limit: 5, Window: time.Second, Burst: 1, MaxDelay: time.Second}, Algorithm: algorithm.LeakyBucket{}, Store: memStore(t, clk), Clock: clk})
	var started time.Time
	svc := &service{onUnary: func(context.Context, *testpb.SimpleRequest) { started = time.Now() }}
	c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: leaky}}}))
	if r := unary(t, c, callCtx(t), nil); r.err != nil {
		t.Fatal(r.err)
	}
	sent := time.Now()
	if r := unary(t, c, callCtx(t), nil); r.err != nil {
		t.Fatal(r.err)
	}
	if waited := started.Sub(sent); waited < 200*time.Millisecond {
		t.Errorf("the second call's handler started %v after it was sent, want at least its 200ms Delay", waited)
	}
}

// A call whose deadline passes while it waits out a leaky bucket's Delay
// ends with DeadlineExceeded, its handler never runs, and the concurrency
// lease it held while queued is given back.
func TestLeakyBucketDeadline(t *testing.T) {
	clk := core.NewManualClock(epoch)
	st := memStore(t, clk)
	// One unit per 10s: a second call is queued for 10s.
	leaky := newLimiter(t, core.Config{Policy: core.Policy{Name: "queue", Limit: 1, Window: 10 * time.Second, MaxDelay: time.Minute}, Algorithm: algorithm.LeakyBucket{}, Store: st, Clock: clk})
	events := make(chan string, 10)
	inflight := newLimiter(t, core.Config{Policy: core.Policy{Name: "inflight", Limit: 1, Window: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: st, Clock: clk,
		Observer: func(e core.Event) { events <- e.Op }})
	svc := &service{}
	c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: leaky}, {Limiter: inflight}}}))
	if r := unary(t, c, callCtx(t), nil); r.err != nil {
		t.Fatal(r.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if r := unary(t, c, ctx, nil); r.code() != codes.DeadlineExceeded {
		t.Fatalf("%v, want DeadlineExceeded", r.err)
	}
	// The server notices the deadline on its own clock: wait (bounded) for
	// its release. The manual clock has not moved, so no lease can have
	// expired instead.
	var ops []string
	for len(ops) < 4 {
		select {
		case op := <-events:
			ops = append(ops, op)
		case <-time.After(10 * time.Second):
			t.Fatalf("inflight events %v, want acquire, release, acquire, release: the queued call kept its lease", ops)
		}
	}
	if want := []string{"acquire", "release", "acquire", "release"}; fmt.Sprint(ops) != fmt.Sprint(want) {
		t.Errorf("inflight events %v, want %v", ops, want)
	}
	if got := svc.unaryRuns.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1: not for the call whose deadline passed in the queue", got)
	}
}

// A call whose deadline passes while it waits in a leaky bucket's queue
// gives its place back, also when the bucket is the last layer: the next
// call waits for the places still taken, not for the one given up. A
// layer after the bucket, which admitted it before it waited, gets its
// unit back too.
func TestLeakyBucketDeadlineGivesPlaceBack(t *testing.T) {
	for _, last := range []bool{true, false} {
		t.Run(map[bool]string{true: "last layer", false: "before another"}[last], func(t *testing.T) {
			leakyDeadlineGivesPlaceBack(t, last)
		})
	}
}

func leakyDeadlineGivesPlaceBack(t *testing.T, last bool) {
	clk := core.NewManualClock(epoch)
	// One unit per 10s: a second call is queued for 10s.
	leaky := newLimiter(t, core.Config{Policy: core.Policy{Name: "queue", Limit: 1, Window: 10 * time.Second, MaxDelay: time.Minute}, Algorithm: algorithm.LeakyBucket{}, Store: memStore(t, clk), Clock: clk})
	tenant := func(*sluicegrpc.Call) string { return "tenant" }
	layers := []sluicegrpc.Layer{{Limiter: leaky, Key: tenant}}
	rate := newLimiter(t, core.Config{Policy: core.Policy{Name: "rate", Limit: 100, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: memStore(t, clk), Clock: clk})
	if !last {
		layers = append(layers, sluicegrpc.Layer{Limiter: rate, Key: tenant})
	}
	p := sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: layers})
	// The server notices the deadline on its own clock: this interceptor,
	// around Sluice's, says when Sluice's has returned.
	returned := make(chan struct{}, 2)
	outer := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		defer func() { returned <- struct{}{} }()
		return h(ctx, req)
	}
	c := serve(t, &service{}, grpc.ChainUnaryInterceptor(outer, sluicegrpc.UnaryServerInterceptor(p)))
	if r := unary(t, c, callCtx(t), nil); r.err != nil {
		t.Fatal(r.err)
	}
	<-returned
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if r := unary(t, c, ctx, nil); r.code() != codes.DeadlineExceeded {
		t.Fatalf("%v, want DeadlineExceeded", r.err)
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued call's interceptor did not return after its deadline")
	}
	d, err := leaky.Allow(context.Background(), sluicegrpc.KeyIdentity("tenant"))
	if err != nil || !d.Allowed {
		t.Fatalf("next call: %+v %v", d, err)
	}
	if d.Delay != 10*time.Second {
		t.Errorf("next call's Delay %v, want 10s: the call that gave up kept its place in the queue", d.Delay)
	}
	if last {
		return
	}
	if d, err := rate.Allow(context.Background(), sluicegrpc.KeyIdentity("tenant")); err != nil || d.Remaining != 98 {
		t.Errorf("the layer after the queue: %+v %v; want 98 left (the first call's and this one's taken)", d, err)
	}
}

// Skipped methods and services are never limited and get no fields.
func TestSkipMethods(t *testing.T) {
	clk := core.NewManualClock(epoch)
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "api", Limit: 1, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: memStore(t, clk), Clock: clk})
	for _, skip := range []string{"/grpc.testing.TestService/UnaryCall", "/grpc.testing.TestService/"} {
		t.Run(skip, func(t *testing.T) {
			c := servePolicy(t, &service{}, sluicegrpc.MustPolicy(sluicegrpc.Config{
				Layers:      []sluicegrpc.Layer{{Limiter: lim, Key: sluicegrpc.Method}},
				SkipMethods: []string{skip, "/other.Service/"},
			}))
			for i := range 3 {
				r := unary(t, c, callCtx(t), nil)
				if r.err != nil || len(r.header.Get(sluicegrpc.MetadataRateLimitPolicy)) != 0 {
					t.Fatalf("skipped call %d: %v, fields %v; want admitted without fields", i, r.err, r.header)
				}
			}
		})
	}
	// Not skipped: the stream is limited (the quota of 1 per method).
	c := servePolicy(t, &service{}, sluicegrpc.MustPolicy(sluicegrpc.Config{
		Layers:      []sluicegrpc.Layer{{Limiter: lim, Key: sluicegrpc.Method}},
		SkipMethods: []string{"/grpc.testing.TestService/UnaryCall"},
	}))
	s, _ := open(t, c)
	if s == nil {
		t.Fatal("first stream refused")
	}
	s.close(t)
	if s, r := open(t, c); s != nil || r.code() != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want ResourceExhausted", r.err)
	}
}

type userKey struct{}

// An identity that an earlier interceptor validated and stored in the
// context keys the calls: two users from one address have a quota each,
// and a call without one falls back to the address.
func TestIdentityFromEarlierInterceptor(t *testing.T) {
	clk := core.NewManualClock(epoch)
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "user", Limit: 1, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: memStore(t, clk), Clock: clk})
	p := sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Key: sluicegrpc.Identity(userKey{})}}})
	// A stand-in for an authentication interceptor: a valid token names
	// its user.
	users := map[string]string{"token-a": "alice", "token-b": "bob"}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if tok := metadata.ValueFromIncomingContext(ctx, "authorization"); len(tok) > 0 {
			if u, ok := users[tok[0]]; ok {
				ctx = context.WithValue(ctx, userKey{}, u)
			}
		}
		return h(ctx, req)
	}
	c := serve(t, &service{}, grpc.ChainUnaryInterceptor(auth, sluicegrpc.UnaryServerInterceptor(p)))
	for _, step := range []struct {
		token string
		want  codes.Code
	}{
		{"token-a", codes.OK}, {"token-b", codes.OK}, {"token-a", codes.ResourceExhausted},
		{"", codes.OK}, {"forged", codes.ResourceExhausted}, {"token-b", codes.ResourceExhausted},
	} {
		var md []string
		if step.token != "" {
			md = []string{"authorization", step.token}
		}
		if r := unary(t, c, callCtx(t, md...), nil); r.code() != step.want {
			t.Errorf("token %q: %v, want %v", step.token, r.err, step.want)
		}
	}
}

// Metadata keys calls by a metadata value (one a gateway validated); a call
// without it falls back to the address.
func TestMetadataKey(t *testing.T) {
	clk := core.NewManualClock(epoch)
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "key", Limit: 1, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: memStore(t, clk), Clock: clk})
	c := servePolicy(t, &service{}, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim, Key: sluicegrpc.Metadata("X-API-Key")}}}))
	for _, step := range []struct {
		key  string
		want codes.Code
	}{{"k1", codes.OK}, {"k2", codes.OK}, {"k1", codes.ResourceExhausted}, {"", codes.OK}, {"", codes.ResourceExhausted}} {
		var md []string
		if step.key != "" {
			md = []string{"x-api-key", step.key}
		}
		if r := unary(t, c, callCtx(t, md...), nil); r.code() != step.want {
			t.Errorf("key %q: %v, want %v", step.key, r.err, step.want)
		}
	}
}

// A call whose deadline passes while the store is asked ends with
// DeadlineExceeded (or Canceled), not Unavailable: the server's other interceptors (logs,
// metrics) see that the client gave up, not that the store failed.
func TestDeadlineWhileDeciding(t *testing.T) {
	block := make(chan struct{})
	lim := newLimiter(t, core.Config{Policy: core.Policy{Name: "api", Limit: 1, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: blockingStore{release: block}, Timeout: -1})
	p := sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}})
	seen := make(chan codes.Code, 1)
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		seen <- status.Code(err)
		return resp, err
	}
	svc := &service{}
	c := serve(t, svc, grpc.ChainUnaryInterceptor(record, sluicegrpc.UnaryServerInterceptor(p)))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := unary(t, c, ctx, nil)
	defer close(block)
	if r.code() != codes.DeadlineExceeded {
		t.Fatalf("client: %v, want DeadlineExceeded", r.err)
	}
	select {
	case code := <-seen:
		// The server's own timer or the client's reset, whichever comes
		// first, ends its context.
		if code != codes.DeadlineExceeded && code != codes.Canceled {
			t.Errorf("server: %v, want DeadlineExceeded or Canceled", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's call never ended")
	}
	if svc.unaryRuns.Load() != 0 {
		t.Error("the handler ran")
	}
}

// blockingStore waits for its call's context (or release) and fails.
type blockingStore struct{ release chan struct{} }

func (b blockingStore) Update(ctx context.Context, _ store.Key, _ store.Mutation) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.release:
		return &store.Error{Op: "update", Err: context.Canceled}
	}
}

// A Policy NewPolicy did not make (nil, or a zero value) refuses every
// call with Internal, and never runs the handler: a server whose limits
// were never wired must not serve unlimited, nor panic in every call.
func TestPolicyNotMadeRefuses(t *testing.T) {
	for name, p := range map[string]*sluicegrpc.Policy{"nil": nil, "zero": {}} {
		svc := &service{}
		c := servePolicy(t, svc, p)
		if r := unary(t, c, callCtx(t), &testpb.SimpleRequest{}); r.code() != codes.Internal || !strings.Contains(status.Convert(r.err).Message(), "not made by NewPolicy") {
			t.Errorf("%s Policy, unary: %v; want Internal naming NewPolicy", name, r.err)
		}
		if _, r := open(t, c); r.code() != codes.Internal {
			t.Errorf("%s Policy, stream: %v; want Internal", name, r.err)
		}
		if n := svc.unaryRuns.Load() + svc.streamRuns.Load(); n != 0 {
			t.Errorf("%s Policy: the handler ran %d times", name, n)
		}
	}
}

// A shadow layer never refuses, and the call announces nothing of it: a
// client that honours the fields would otherwise hold the calls the limit
// is not to refuse. Beside an enforced layer, only that one is announced.
func TestShadowLayerIsNotAnnounced(t *testing.T) {
	st := memStore(t, nil)
	dark := newLimiter(t, core.Config{Policy: core.Policy{Name: "dark", Limit: 1, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: st, Shadow: true})
	lit := newLimiter(t, core.Config{Policy: core.Policy{Name: "lit", Limit: 10, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: st})
	for _, layers := range [][]sluicegrpc.Layer{{{Limiter: dark}}, {{Limiter: dark}, {Limiter: lit}}} {
		p, err := sluicegrpc.NewPolicy(sluicegrpc.Config{Layers: layers})
		if err != nil {
			t.Fatal(err)
		}
		c := servePolicy(t, &service{}, p)
		for i := range 3 {
			r := unary(t, c, callCtx(t), &testpb.SimpleRequest{})
			if r.err != nil {
				t.Fatalf("%d layers, call %d: %v; want admitted", len(layers), i, r.err)
			}
			rl, pol := one(r.header, sluicegrpc.MetadataRateLimit), one(r.header, sluicegrpc.MetadataRateLimitPolicy)
			if strings.Contains(rl+pol, "dark") || (len(layers) == 2) != strings.HasPrefix(pol, `"lit";q=10`) || (len(layers) == 2) != strings.HasPrefix(rl, `"lit";r=`) {
				t.Fatalf("%d layers, call %d: ratelimit %q, ratelimit-policy %q; want the lit layer alone", len(layers), i, rl, pol)
			}
		}
	}
}

// A shadow layer that would refuse does not lengthen the RetryInfo of a
// refusal by a later, enforced layer: the retry passes the shadow layer
// whatever it counts.
func TestShadowLayerIsNotInRetryInfo(t *testing.T) {
	st := memStore(t, nil)
	dark := newLimiter(t, core.Config{Policy: core.Policy{Name: "dark", Limit: 1, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: st, Shadow: true})
	sec := newLimiter(t, core.Config{Policy: core.Policy{Name: "sec", Limit: 1, Window: time.Second}, Algorithm: algorithm.GCRA{}, Store: st})
	p, err := sluicegrpc.NewPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: dark}, {Limiter: sec}}})
	if err != nil {
		t.Fatal(err)
	}
	c := servePolicy(t, &service{}, p)
	if r := unary(t, c, callCtx(t), &testpb.SimpleRequest{}); r.err != nil {
		t.Fatalf("the first call: %v", r.err)
	}
	r := unary(t, c, callCtx(t), &testpb.SimpleRequest{})
	if status.Code(r.err) != codes.ResourceExhausted {
		t.Fatalf("the second call: %v; want ResourceExhausted", r.err)
	}
	if ri, ok := r.retryInfo(); !ok || ri > time.Second {
		t.Errorf("RetryInfo %v (present %v); want at most the enforced one-second layer's wait", ri, ok)
	}
}

// A shadow layer never refuses, also a call whose cost exceeds its quota,
// which an enforced layer answers ResourceExhausted without a decision: the
// call passes the shadow layer, uncounted there.
func TestShadowLayerCostAboveQuota(t *testing.T) {
	st := memStore(t, nil)
	dark := newLimiter(t, core.Config{Policy: core.PerSecond("dark", 4), Algorithm: algorithm.GCRA{}, Store: st, Shadow: true})
	p, err := sluicegrpc.NewPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: dark, Cost: func(*sluicegrpc.Call) int64 { return 5 }}}})
	if err != nil {
		t.Fatal(err)
	}
	c := servePolicy(t, &service{}, p)
	for i := range 3 {
		if r := unary(t, c, callCtx(t), &testpb.SimpleRequest{}); r.err != nil {
			t.Fatalf("call %d costing 5 over a shadow layer of 4: %v; want admitted", i, r.err)
		}
	}
}
