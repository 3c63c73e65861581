package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// TestEachCallEndsAtItsOwnDeadline: during a stall a little longer than
// Config.Timeout, every call ends at its own deadline, never before: those
// that started early fail at theirs, and those whose deadline falls after
// the stall are decided. valkey-go closes its shared connection when a
// command it sent synchronously meets its socket deadline, and every
// command queued behind it then failed with the first one's deadline.
func TestEachCallEndsAtItsOwnDeadline(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	const (
		timeout = 100 * time.Millisecond
		stall   = 150 * time.Millisecond
		spacing = 4 * time.Millisecond
		calls   = 25 // the last starts 96 ms into the stall
	)
	for _, standalone := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedicated connections %v", standalone), func(t *testing.T) {
			proxy, l := proxiedLimiter(t, addr, "stall", standalone, timeout)
			proxy.Stall()
			time.AfterFunc(stall, proxy.Resume)
			var wg sync.WaitGroup
			base := time.Now()
			for i := range calls {
				wg.Go(func() {
					start := time.Now()
					_, err := l.Allow(context.Background(), fmt.Sprint("id", i))
					took := time.Since(start)
					switch {
					case err != nil && took < timeout-2*time.Millisecond:
						t.Errorf("call %d, started %v into the stall: failed after %v, before its Timeout of %v: %v", i, start.Sub(base).Round(time.Millisecond), took.Round(time.Millisecond), timeout, err)
					case err != nil && start.Sub(base)+timeout > stall+40*time.Millisecond:
						t.Errorf("call %d, started %v into the stall: %v; its deadline fell %v after the stall ended", i, start.Sub(base).Round(time.Millisecond), err, (start.Sub(base) + timeout - stall).Round(time.Millisecond))
					}
				})
				time.Sleep(spacing)
			}
			wg.Wait()
		})
	}
}

// proxiedLimiter is a Limiter of timeout on a store over a client of addr
// behind a stall proxy, warmed up: a standalone client, or (standalone
// false) one the store leaves its commands to, as it does a cluster's,
// whose every command takes valkey-go's shared connection.
func proxiedLimiter(t *testing.T, addr, name string, standalone bool, timeout time.Duration) (*stallProxy, *core.Limiter) {
	t.Helper()
	proxy := newStallProxy(t, addr)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{proxy.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if !standalone {
		c = opaque{c}
	}
	s := valkey.New(c, nil)
	l, err := core.New(core.Config{Policy: core.PerSecond(name, 1000), Algorithm: algorithm.GCRA{}, Store: s,
		Prefix: "sluice-valkey-test-" + randomHex(t), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	// The store's pipelined connections are dialled in the background: one
	// dialled after Stall would not stall.
	waitPipesUp(t, s)
	for range 8 {
		if _, err := l.Allow(context.Background(), "warm"); err != nil {
			t.Fatal(err)
		}
	}
	return proxy, l
}

// opaque hides a client's type, so that the store sends every command
// through valkey-go's own routing.
type opaque struct{ valkeygo.Client }

// Mode says cluster, as a cluster client's would: the store keeps no
// connections of its own for it.
func (opaque) Mode() valkeygo.ClientMode { return valkeygo.ClientModeCluster }

// TestCallsEndAtTheirDeadlineWhileReconnecting: after the connections
// dropped, a server that accepts new ones and answers nothing (hung, or
// behind a proxy that lost it) must not hold a call past its deadline.
// valkey-go dials a broken shared connection again within the next command
// that needs it, and waits for its handshake (HELLO) for the dialer's
// timeout, 5 s by default, whatever the command's deadline: calls took
// 5 s under a Timeout of 100 ms. Once the server answers again, calls are
// decided again.
func TestCallsEndAtTheirDeadlineWhileReconnecting(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	const timeout = 100 * time.Millisecond
	for _, standalone := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedicated connections %v", standalone), func(t *testing.T) {
			proxy, l := proxiedLimiter(t, addr, "reconnect", standalone, timeout)
			proxy.Drop()
			proxy.Hang()
			var wg sync.WaitGroup
			for round := range 3 {
				for i := range 4 {
					wg.Go(func() {
						start := time.Now()
						_, err := l.Allow(context.Background(), fmt.Sprint("id", round, i))
						if took := time.Since(start); took > timeout+200*time.Millisecond {
							t.Errorf("round %d, call %d: took %v under a Timeout of %v (%v)", round, i, took.Round(time.Millisecond), timeout, err)
						}
					})
				}
				wg.Wait()
			}
			recovered := func() {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for {
					_, err := l.Allow(context.Background(), "after")
					if err == nil {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("no call was decided within 10 s of the server answering again: %v", err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			proxy.Resume()
			recovered()
			// Again, on connections that are up: one call after another
			// meets the store's connections in turn, each of which ends at
			// its caller's deadline and is not mistaken for broken (closing
			// one that waits for a silent server takes valkey-go a second).
			for range 20 {
				_, _ = l.Allow(context.Background(), "warm")
			}
			proxy.Hang()
			for i := range 8 {
				start := time.Now()
				_, err := l.Allow(context.Background(), fmt.Sprint("again", i))
				if took := time.Since(start); took > timeout+200*time.Millisecond {
					t.Errorf("call %d in the second hang: took %v under a Timeout of %v (%v)", i, took.Round(time.Millisecond), timeout, err)
				}
			}
			proxy.Resume()
			recovered()
		})
	}
}

// TestCancellationEndsACall: a caller whose context is cancelled (an HTTP
// request whose client went away) gets its answer at the cancellation, not
// at the Limiter's Timeout, one call at a time (which the store would send
// down a dedicated connection, whose socket sees only the deadline) as
// well as many.
func TestCancellationEndsACall(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	const timeout = 400 * time.Millisecond
	for _, standalone := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedicated connections %v", standalone), func(t *testing.T) {
			proxy, l := proxiedLimiter(t, addr, "cancel", standalone, timeout)
			proxy.Stall()
			defer proxy.Resume()
			for i := range 3 {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(timeout/10, cancel)
				start := time.Now()
				_, err := l.Allow(ctx, fmt.Sprint("id", i))
				if took := time.Since(start); !errors.Is(err, context.Canceled) || took > timeout/2 {
					t.Errorf("call %d: %v after %v; want context.Canceled at the cancellation (%v), well before the Timeout (%v)", i, err, took.Round(time.Millisecond), timeout/10, timeout)
				}
			}
		})
	}
}

// TestOthersCancellationFailsNoOne: while the store's own connections are
// still being made, its calls ride valkey-go's shared connection, which
// valkey-go dials under the context of the command that needs it first.
// A caller who cancels must not fail the callers who did not: 16 callers
// cancelled within 300 µs and 16 who never cancel, at once, on a fresh
// store, round after round.
func TestOthersCancellationFailsNoOne(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	var failed atomic.Int64
	var sample atomic.Value
	for range 20 {
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		s := valkey.New(c, nil)
		l, err := core.New(core.Config{Policy: core.Policy{Name: "others", Limit: 1_000_000, Window: time.Hour},
			Algorithm: algorithm.FixedWindow{}, Store: s, Timeout: time.Second, Prefix: "sluice-valkey-test-" + randomHex(t)})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Go(func() {
				if i%2 == 0 {
					ctx, cancel := context.WithCancel(context.Background())
					time.AfterFunc(time.Duration(i*20)*time.Microsecond, cancel)
					l.Allow(ctx, "k")
					cancel()
					return
				}
				if _, err := l.Allow(context.Background(), "k"); err != nil {
					failed.Add(1)
					sample.Store(err)
				}
			})
		}
		wg.Wait()
		s.Close()
		c.Close()
	}
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 320 callers that never cancelled failed, e.g. %v", n, sample.Load())
	}
}

// TestCancelledDeleteIsUnknown: a delete (a Limiter's Reset) whose caller
// left after it was sent may still land: its error says the outcome is
// unknown, as a script's does.
func TestCancelledDeleteIsUnknown(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	proxy, l := proxiedLimiter(t, addr, "reset", true, 400*time.Millisecond)
	proxy.Stall()
	defer proxy.Resume()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(40*time.Millisecond, cancel)
	if err := l.Reset(ctx, "id"); !errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("Reset cancelled with its delete sent: %v; want an error matching core.ErrOutcomeUnknown", err)
	}
}
