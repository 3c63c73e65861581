package sluicegrpc_test

import (
	"context"
	"testing"
	"time"

	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"google.golang.org/grpc/codes"
)

// algPolicy is 3 per minute for every algorithm; the leaky bucket queues
// for at most 1µs, so that it admits its burst and refuses the rest
// instead of making the test sleep.
func algPolicy() core.Policy {
	return core.Policy{Name: "api", Limit: 3, Window: time.Minute, MaxDelay: time.Microsecond}
}

// twinOf is a limiter deciding the same policy on the same store and clock
// under another prefix: stepped alongside the interceptor, it says which
// decision each call must report.
func twinOf(t *testing.T, alg core.Algorithm, st store.Store, clk core.Clock) *core.Limiter {
	return newLimiter(t, core.Config{Policy: algPolicy(), Algorithm: alg, Store: st, Clock: clk, Prefix: "twin"})
}

// expect takes the twin's decision for the next call (for the concurrency
// limit, a lease given back at once, as a finished call gives it back).
func expect(t *testing.T, twin *core.Limiter) core.Decision {
	t.Helper()
	ctx := context.Background()
	if _, ok := twin.Algorithm().(core.Leaser); ok {
		ls, d, err := twin.Acquire(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if ls != nil {
			if err := ls.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	d, err := twin.Allow(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// check asserts that a call reported exactly the decision d.
func check(t *testing.T, i int, r reply, d core.Decision, policyField string) {
	t.Helper()
	if got := one(r.header, sluicegrpc.MetadataRateLimitPolicy); got != policyField {
		t.Errorf("call %d: ratelimit-policy %q, want %q", i, got, policyField)
	}
	if got, want := one(r.header, sluicegrpc.MetadataRateLimit), item("api", d); got != want {
		t.Errorf("call %d: ratelimit %q, want %q", i, got, want)
	}
	if d.Allowed {
		if r.err != nil {
			t.Errorf("call %d: %v, want admitted", i, r.err)
		}
		return
	}
	if r.code() != codes.ResourceExhausted {
		t.Fatalf("call %d: %v, want ResourceExhausted", i, r.err)
	}
	if ri, ok := r.retryInfo(); !ok || ri != d.RetryAfter {
		t.Errorf("call %d: RetryInfo %v (present %v), want %v", i, ri, ok, d.RetryAfter)
	}
	if got, want := one(r.header, sluicegrpc.MetadataRetryAfter), itoa(max(ceilSeconds(d.RetryAfter), 1)); got != want {
		t.Errorf("call %d: retry-after %q, want %q", i, got, want)
	}
	if got, want := one(r.trailer, sluicegrpc.MetadataRateLimit), item("api", d); got != want {
		t.Errorf("call %d: trailer ratelimit %q, want %q", i, got, want)
	}
	if v := r.violated(); len(v) != 1 || v[0] != "api" {
		t.Errorf("call %d: QuotaFailure subjects %v, want [api]", i, v)
	}
}

func policyFieldOf(alg core.Algorithm) string {
	if _, ok := alg.(core.Leaser); ok {
		return `"api";q=3;qu="concurrent-requests"`
	}
	return `"api";q=3;w=60`
}

// Every algorithm, over unary calls on a real server: exactly the quota is
// admitted under a frozen clock, each call reports the very decision that
// was made, a refusal's RetryInfo is its honest wait (a call after waiting
// it is admitted), and a concurrency lease is given back when a unary call
// ends (so sequential calls never run out).
func TestEveryAlgorithmUnary(t *testing.T) {
	for _, alg := range algorithm.All() {
		t.Run(alg.Name(), func(t *testing.T) {
			clk := core.NewManualClock(epoch)
			st := memStore(t, clk)
			lim := newLimiter(t, core.Config{Policy: algPolicy(), Algorithm: alg, Store: st, Clock: clk})
			twin := twinOf(t, alg, st, clk)
			svc := &service{}
			c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}}))

			_, leaser := alg.(core.Leaser)
			admitted, firstWait := 0, time.Duration(-1)
			for i := range 5 {
				d := expect(t, twin)
				r := unary(t, c, callCtx(t), nil)
				check(t, i, r, d, policyFieldOf(alg))
				if r.err == nil {
					admitted++
				} else if firstWait < 0 {
					firstWait, _ = r.retryInfo()
				}
			}
			want := 3
			if leaser {
				want = 5
			}
			if admitted != want {
				t.Fatalf("admitted %d of 5 calls, want %d", admitted, want)
			}
			if got := svc.unaryRuns.Load(); got != int64(want) {
				t.Errorf("handler ran %d times, want %d", got, want)
			}
			if leaser {
				return
			}
			clk.Advance(firstWait)
			d := expect(t, twin)
			r := unary(t, c, callCtx(t), nil)
			if r.err != nil {
				t.Fatalf("after waiting the RetryInfo delay %v: %v, want admitted", firstWait, r.err)
			}
			check(t, 5, r, d, policyFieldOf(alg))
		})
	}
}

// Every rate algorithm over streams: a stream is charged once when it
// opens, and exactly the quota of streams is admitted.
func TestEveryAlgorithmStream(t *testing.T) {
	for _, alg := range algorithm.All() {
		if _, ok := alg.(core.Leaser); ok {
			continue // TestStreamLeaseReleasedWhenStreamEnds
		}
		t.Run(alg.Name(), func(t *testing.T) {
			clk := core.NewManualClock(epoch)
			st := memStore(t, clk)
			lim := newLimiter(t, core.Config{Policy: algPolicy(), Algorithm: alg, Store: st, Clock: clk})
			twin := twinOf(t, alg, st, clk)
			svc := &service{}
			c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}}))
			admitted := 0
			for i := range 5 {
				d := expect(t, twin)
				s, r := open(t, c)
				check(t, i, r, d, policyFieldOf(alg))
				if s != nil {
					admitted++
					// More messages on an admitted stream cost nothing.
					for range 3 {
						if err := s.s.Send(nil); err != nil {
							t.Fatal(err)
						}
						if _, err := s.s.Recv(); err != nil {
							t.Fatal(err)
						}
					}
					s.close(t)
				}
			}
			if admitted != 3 || svc.streamRuns.Load() != 3 {
				t.Fatalf("admitted %d streams (handler ran %d times), want 3", admitted, svc.streamRuns.Load())
			}
		})
	}
}

// A concurrency lease is held for the whole stream and given back when the
// stream ends: with 3 slots, 3 open streams fill them, a fourth is refused,
// and each stream that ends frees its slot for a new one.
func TestStreamLeaseReleasedWhenStreamEnds(t *testing.T) {
	clk := core.NewManualClock(epoch)
	pol := core.Policy{Name: "api", Limit: 3, Window: time.Minute}
	lim := newLimiter(t, core.Config{Policy: pol, Algorithm: algorithm.Concurrency{}, Store: memStore(t, clk), Clock: clk})
	svc := &service{}
	c := servePolicy(t, svc, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}}))

	var open3 []*stream
	for i := range 3 {
		s, r := open(t, c)
		if s == nil {
			t.Fatalf("stream %d: %v, want admitted", i, r.err)
		}
		if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"api";r=`+itoa(int64(2-i))+`;t=60`; got != want {
			t.Errorf("stream %d: ratelimit %q, want %q", i, got, want)
		}
		open3 = append(open3, s)
	}
	s, r := open(t, c)
	if s != nil || r.code() != codes.ResourceExhausted {
		t.Fatalf("fourth stream: %v, want ResourceExhausted", r.err)
	}
	// The oldest lease's TTL runs out in a minute: that is the wait.
	if ri, ok := r.retryInfo(); !ok || ri != time.Minute {
		t.Errorf("RetryInfo %v (present %v), want 1m", ri, ok)
	}
	for round := range 3 {
		open3[round].close(t)
		s, r := open(t, c)
		if s == nil {
			t.Fatalf("round %d: after a stream ended: %v, want admitted", round, r.err)
		}
		if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"api";r=0;t=60`; got != want {
			t.Errorf("round %d: ratelimit %q, want %q", round, got, want)
		}
		open3[round] = s
	}
	for _, s := range open3 {
		s.close(t)
	}
	// Every slot is free again: three new streams are admitted at once.
	for i := range 3 {
		s, r := open(t, c)
		if s == nil {
			t.Fatalf("after every stream ended, stream %d: %v, want admitted", i, r.err)
		}
		defer s.close(t)
	}
	if svc.streamRuns.Load() != 9 {
		t.Errorf("handler ran %d times, want 9", svc.streamRuns.Load())
	}
}
