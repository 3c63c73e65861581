package redis

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// The deadline tests give each call a Limiter timeout of callTimeout and
// allow slack on top: far less than go-redis's defaults would take (a 5s
// ReadTimeout, three times over with retries), far more than a loaded
// machine needs to return an error.
const (
	callTimeout = 300 * time.Millisecond
	slack       = 2 * time.Second
)

// deadlineLimiters returns a fail-closed and a fail-open Limiter on s.
func deadlineLimiters(t *testing.T, s *Store, noScript bool) (closed, open *core.Limiter) {
	t.Helper()
	p := core.Policy{Name: "deadline", Limit: 10, Window: time.Minute}
	for _, f := range []core.FailureMode{core.FailClosed, core.FailOpen} {
		l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: s, Timeout: callTimeout, Failure: f, NoScript: noScript})
		if err != nil {
			t.Fatal(err)
		}
		if f == core.FailClosed {
			closed = l
		} else {
			open = l
		}
	}
	return closed, open
}

// checkDeadline makes concurrent calls through both limiters and checks
// that every one returns in time: fail-closed with an error matching
// core.ErrUnavailable, fail-open with a degraded admission.
func checkDeadline(t *testing.T, s *Store, noScript bool) {
	t.Helper()
	closed, open := deadlineLimiters(t, s, noScript)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			l := closed
			if i%2 == 1 {
				l = open
			}
			start := time.Now()
			d, err := l.Allow(context.Background(), "who")
			if el := time.Since(start); el > callTimeout+slack {
				t.Errorf("call %d returned after %s, deadline %s", i, el, callTimeout)
			}
			if l == closed {
				if !errors.Is(err, core.ErrUnavailable) {
					t.Errorf("fail-closed call %d: %+v, %v; want an error matching core.ErrUnavailable", i, d, err)
				}
				return
			}
			if err != nil || !d.Allowed || !d.Degraded {
				t.Errorf("fail-open call %d: %+v, %v; want a degraded admission", i, d, err)
			}
		})
	}
	wg.Wait()
}

// TestDeadlineSilentServer: a server that accepts connections and never
// answers. The user's client has go-redis's defaults.
func TestDeadlineSilentServer(t *testing.T) {
	onSilentServer(t, checkDeadline)
}

// onSilentServer runs check on a store over a server that accepts
// connections and never answers, for each of the store's paths: the
// batcher, direct calls, and the generic read-modify-write.
func onSilentServer(t *testing.T, check func(t *testing.T, s *Store, noScript bool)) {
	for _, tc := range []struct {
		name     string
		opts     *Options
		noScript bool
	}{
		{"batched", nil, false},
		{"direct", &Options{NoBatch: true}, false},
		{"generic", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t, "")
			c := goredis.NewClient(&goredis.Options{Addr: p.Addr()})
			t.Cleanup(func() { _ = c.Close() })
			s := New(c, tc.opts)
			t.Cleanup(func() { _ = s.Close() })
			check(t, s, tc.noScript)
		})
	}
}

// TestDeadlineStoppedServer: a server that worked, then stopped (the proxy
// in front of it closes every connection and stops listening), and an
// address where nothing ever listened.
func TestDeadlineStoppedServer(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		p := newProxy(t, testenv.RedisAddr(t))
		c := goredis.NewClient(&goredis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		s := New(c, nil)
		t.Cleanup(func() { _ = s.Close() })
		closed, _ := deadlineLimiters(t, s, false)
		if _, err := closed.Allow(ctxT(t), "who"); err != nil {
			t.Fatalf("before the stop: %v", err)
		}
		p.Close()
		checkDeadline(t, s, false)
		checkDeadline(t, s, true)
	})
	t.Run("never listened", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		s := New(c, nil)
		t.Cleanup(func() { _ = s.Close() })
		checkDeadline(t, s, false)
		// A refused connection proves that nothing was sent.
		_, err = s.RunScript(ctxT(t), algorithm.GCRA{}.Script(), store.Key{Namespace: "x", Identity: "y"}, store.ScriptArgs{N: 1, Limit: 1, Window: 1e6, Burst: 1, Interval: 1e6})
		if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) {
			t.Fatalf("refused connection: %v; want core.ErrUnavailable and not core.ErrOutcomeUnknown", err)
		}
	})
}

// TestDeadlineStoppedCluster: every node of the real cluster behind a proxy
// that stops after the first decision.
func TestDeadlineStoppedCluster(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	via := map[string]string{}
	var ps []*proxy
	for _, a := range addrs {
		p := newProxy(t, a)
		via[a] = p.Addr()
		ps = append(ps, p)
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: addrs,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if pa, ok := via[addr]; ok {
				addr = pa
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, nil)
	t.Cleanup(func() { _ = s.Close() })
	closed, _ := deadlineLimiters(t, s, false)
	if _, err := closed.Allow(ctxT(t), "who"); err != nil {
		t.Fatalf("before the stop: %v", err)
	}
	for _, p := range ps {
		p.Close()
	}
	checkDeadline(t, s, false)
	checkDeadline(t, s, true)
}

// TestDeadlineOfTheCaller: a caller whose own deadline, shorter than the
// Limiter's, passes while a silent server holds the call gets ctx.Err():
// nobody waits for the answer, so the failure policy is not asked (fail
// open would admit a client that is gone).
func TestDeadlineOfTheCaller(t *testing.T) {
	onSilentServer(t, func(t *testing.T, s *Store, noScript bool) {
		closed, open := deadlineLimiters(t, s, noScript)
		for _, l := range []*core.Limiter{closed, open} {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout/10)
			d, err := l.Allow(ctx, "who")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || d.Allowed {
				t.Errorf("%+v, %v; want the caller's context.DeadlineExceeded", d, err)
			}
		}
	})
}

// A caller whose context is cancelled (an HTTP request whose client went
// away) gets its answer at the cancellation, not at the Limiter's
// Timeout: go-redis sets a context's deadline on its socket but does not
// watch its cancellation, so the store must. The generic read-modify-write
// (NoScript), which hands the Limiter's mutation to each round trip, sees
// it between round trips only.
func TestCancellationOfTheCaller(t *testing.T) {
	onSilentServer(t, func(t *testing.T, s *Store, noScript bool) {
		// The generic path's round trip under way ends at the Timeout.
		within := callTimeout / 2
		if noScript {
			within = callTimeout + slack
		}
		closed, open := deadlineLimiters(t, s, noScript)
		for _, l := range []*core.Limiter{closed, open} {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(callTimeout/10, cancel)
			start := time.Now()
			d, err := l.Allow(ctx, "who")
			if el := time.Since(start); !errors.Is(err, context.Canceled) || d.Allowed || el > within {
				t.Errorf("%+v, %v after %v; want context.Canceled within %v of the call (cancelled at %v, Timeout %v)", d, err, el.Round(time.Millisecond), within, callTimeout/10, callTimeout)
			}
		}
		if noScript {
			return // Delete and the multi-limit script are the same on every path
		}
		m, err := core.NewMulti(core.MultiConfig{Name: "cancel", Store: s, Timeout: callTimeout})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(callTimeout/10, cancel)
		start := time.Now()
		if _, _, err := m.Allow(ctx, "who", threeLimits(t), nil); !errors.Is(err, context.Canceled) || time.Since(start) > callTimeout/2 {
			t.Errorf("Multi: %v after %v; want context.Canceled at the cancellation", err, time.Since(start).Round(time.Millisecond))
		}
		ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		time.AfterFunc(callTimeout/10, cancel)
		start = time.Now()
		if err := s.Delete(ctx, closed.Key("who")); !errors.Is(err, context.Canceled) || time.Since(start) > callTimeout/2 {
			t.Errorf("Delete: %v after %v; want context.Canceled at the cancellation", err, time.Since(start).Round(time.Millisecond))
		}
	})
}

// A delete whose context had ended before it began was never sent: its
// error is the context's, not an unknown outcome.
func TestDeleteNeverSentIsNotUnknown(t *testing.T) {
	s := newStore(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Delete(ctx, store.Key{Namespace: "sluice-test:never-sent", Identity: "who"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("Delete under a cancelled context: %v; want context.Canceled, not an unknown outcome", err)
	}
}
