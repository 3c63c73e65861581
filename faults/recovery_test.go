package faults

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/guard"
)

// TestBreakerRecoveryAfterRestart kills a real redis-server (no proxy: the
// store dials it directly, as in production), keeps it down, starts it
// again on the same port, and measures how soon a Limiter behind a Breaker
// decides with the store again: within 1 s of the server's return, for
// go-redis and valkey-go, after a short and a long outage (a long one lets
// go-redis's own dial back-off set in).
func TestBreakerRecoveryAfterRestart(t *testing.T) {
	for _, sk := range storeKinds[:2] {
		for _, outage := range []time.Duration{300 * time.Millisecond, 2 * time.Second} {
			t.Run(sk.name+"/"+outage.String(), func(t *testing.T) {
				t.Parallel()
				srv := startRedis(t)
				br := guard.NewBreaker(sk.open(t, []string{srv.Addr}, false), nil)
				l := newMatrixLimiter(t, br.Store(), core.FailOpen, nil)
				ctx := context.Background()
				if d, err := l.Allow(ctx, "u"); err != nil || d.Degraded {
					t.Fatalf("healthy: %+v, %v", d, err)
				}
				srv.Kill()
				stop := time.Now().Add(outage)
				var slowest time.Duration
				for time.Now().Before(stop) {
					start := time.Now()
					d, err := l.Allow(ctx, "u")
					slowest = max(slowest, time.Since(start))
					if err != nil || !d.Degraded {
						t.Fatalf("server down: %+v, %v; want a degraded admission", d, err)
					}
					time.Sleep(2 * time.Millisecond)
				}
				// Before the breaker opens, each call waits its deadline for
				// go-redis's background dial: five of them take 500 ms.
				if outage > time.Second && br.State() == guard.Closed {
					t.Errorf("breaker closed after %v of outage", outage)
				}
				srv.Start()
				back := time.Now()
				for {
					d, err := l.Allow(ctx, "u")
					if err != nil {
						t.Fatal(err)
					}
					if !d.Degraded {
						break
					}
					if time.Since(back) > 5*time.Second {
						t.Fatal("the store was not used again within 5 s of its return")
					}
					time.Sleep(2 * time.Millisecond)
				}
				took := time.Since(back)
				t.Logf("%s: outage %v, slowest call while down %v, store used again %v after the server answered", sk.name, outage, slowest, took.Round(time.Millisecond))
				if took > recoveryBound {
					t.Errorf("store used again %v after the server came back, more than %v", took, recoveryBound)
				}
			})
		}
	}
}

// TestOutageLatencyWithAndWithoutBreaker measures what a call costs while
// a redis-server is down (killed; the store dials it directly), fail open,
// with the store bare and behind a Breaker: the breaker must make the
// median call at least ten times cheaper once it is open.
func TestOutageLatencyWithAndWithoutBreaker(t *testing.T) {
	for _, sk := range storeKinds[:2] {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			median := func(guarded bool) time.Duration {
				srv := startRedis(t)
				s := sk.open(t, []string{srv.Addr}, false)
				if guarded {
					s = guard.NewBreaker(s, nil).Store()
				}
				l := newMatrixLimiter(t, s, core.FailOpen, nil)
				ctx := context.Background()
				if _, err := l.Allow(ctx, "u"); err != nil {
					t.Fatal(err)
				}
				srv.Kill()
				for range guard.DefaultConsecutiveFailures + 1 { // let a breaker open
					_, _ = l.Allow(ctx, "u")
				}
				var lats []time.Duration
				for range 15 {
					start := time.Now()
					d, err := l.Allow(ctx, "u")
					lats = append(lats, time.Since(start))
					if err != nil || !d.Degraded {
						t.Fatalf("server down: %+v, %v; want a degraded admission", d, err)
					}
				}
				slices.Sort(lats)
				return lats[len(lats)/2]
			}
			bare, guarded := median(false), median(true)
			t.Logf("%s, server down, fail open: median call %v bare, %v behind a breaker", sk.name, bare, guarded)
			if guarded*10 > bare && bare > time.Millisecond {
				t.Errorf("median call behind an open breaker %v, bare %v: want at least ten times cheaper", guarded, bare)
			}
		})
	}
}
