package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/ctxend"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// open is how many connections the proxy has carried that are still open.
func (p *stallProxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// proxiedStore is a Store over one pipelined connection through a proxy,
// a client straight to the server, a fresh key and countScript's arguments.
func proxiedStore(t *testing.T) (*stallProxy, *valkey.Store, valkeygo.Client, store.Key, store.ScriptArgs) {
	t.Helper()
	addr := backends[0].addrs(t)[0]
	proxy := newStallProxy(t, addr)
	s := valkey.New(stalledClient(t, proxy, false), nil)
	t.Cleanup(func() { _ = s.Close() })
	direct := newClient(t, []string{addr})
	p := core.PerSecond("direct", 5)
	return proxy, s, direct, freshKey(t, direct), core.NewScriptArgs(&p, 1, 1)
}

// waitPipesUp waits until s's pipelined connections, which it makes in the
// background from New on, are up: a connection made later would pass a
// stallProxy's Stall.
func waitPipesUp(t *testing.T, s *valkey.Store) {
	t.Helper()
	for i := 0; ; i++ {
		if up, of := valkey.PipesUp(s); up == of {
			return
		}
		if i == 500 {
			t.Fatal("the store's pipelined connections were not up within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A few callers at once each get a connection of their own instead of
// queueing on a pipelined connection (which costs two goroutine handoffs a
// command), and many callers share the pipeline, the most of them in
// batches: the store opens at most 2 × GOMAXPROCS connections beyond the
// client's and its own pipelined ones, and every call of any kind
// succeeds, once each.
func TestFewCallersGetConnectionsOfTheirOwn(t *testing.T) {
	proxy, s, direct, key, args := proxiedStore(t)
	run := func(callers, each int) {
		t.Helper()
		runCallers(t, s, key, args, callers, each)
	}
	// The pipelined connections are made in the background from New on:
	// count them with the client's, once they are up.
	waitPipesUp(t, s)
	shared := proxy.open()
	run(1, 1)
	run(4, 200)
	lanes := max(2, 2*runtime.GOMAXPROCS(0))
	if got := proxy.open() - shared; got < 2 || got > lanes {
		t.Fatalf("4 callers opened %d connections beside the client's and the pipelined ones, %d, want 2 to %d of the store's own", got, shared, lanes)
	}
	many := valkey.BatchFrom() + 32 // some of them in batches
	run(many, 20)
	if got := proxy.open() - shared; got > lanes {
		t.Fatalf("%d callers opened %d connections beside the client's, want at most %d", many, got, lanes)
	}
	if n, want := runs(t, direct, key), int64(1+4*200+many*20); n != want {
		t.Fatalf("the script ran %d times, want %d: one a call", n, want)
	}
}

// When every connection breaks, the calls on the store's own connections
// fail once, each returning by its deadline, and are never sent again; the
// store replaces the connections in the background, and calls succeed
// again within a few.
func TestOwnConnectionsReplaced(t *testing.T) {
	proxy, s, direct, key, args := proxiedStore(t)
	call := func() error { return runByDeadline(t, s, key, args) }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				if err := call(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	made := int64(4 * 50)
	if got := runs(t, direct, key); got != made {
		t.Fatalf("the script ran %d times for %d calls", got, made)
	}

	proxy.Drop()
	calls, failed := int64(0), 0
	ok := false
	for range 200 {
		calls++
		err := call()
		if err == nil {
			ok = true
			break
		}
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		failed++
		time.Sleep(5 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("no call succeeded in %d after the connections broke", calls)
	}
	t.Logf("after the connections broke: %d calls failed before one succeeded", failed)
	if got := settle(t, direct, key, made+calls); got > made+calls {
		t.Fatalf("the script ran %d times for %d calls: some call was sent twice", got, made+calls)
	}
	for range 20 {
		if err := call(); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
}

// Close while calls are in flight: each call returns, with its result or an
// error, and the store's connections go back to the client, which works on.
func TestCloseWithCallsInFlight(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	c := newClient(t, []string{addr})
	s := valkey.New(c, nil)
	key := freshKey(t, c)
	p := core.PerSecond("closing", 5)
	args := core.NewScriptArgs(&p, 1, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				// A deadline and no other end, as a Limiter's calls for a
				// caller that cannot cancel have: they take the dedicated
				// connections.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := s.RunScript(ctxend.DeadlineOnly(ctx), countScript, key, args)
				cancel()
				if err != nil && !errors.Is(err, core.ErrUnavailable) {
					t.Error(err)
					return
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("the client after the store closed: %v", err)
	}
}

// With more calls in flight than valkey.BatchFrom, the ones beyond it wait
// for a batch. When the replies stall, a call whose deadline ends while it
// waits was never sent: it fails with a known outcome, and the server never
// runs it. The calls in flight before it succeed once the replies flow
// again, and none runs twice.
func TestBatchedCallsNeverSentAtTheirDeadline(t *testing.T) {
	proxy, s, direct, key, args := proxiedStore(t)
	if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
		t.Fatal(err)
	}
	waitPipesUp(t, s)
	proxy.Stall()
	call := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := s.RunScript(ctx, countScript, key, args)
		return err
	}
	// Every lane busy: the dedicated connections, the pipeline up to
	// BatchFrom, and both batches in flight.
	first := valkey.BatchFrom() + 2
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range first {
		wg.Go(func() {
			if err := call(5 * time.Second); err != nil {
				failed.Add(1)
				t.Errorf("a call in flight before the queue: %v", err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // they are in flight
	const queued = 16
	var later sync.WaitGroup
	for range queued {
		later.Go(func() {
			err := call(100 * time.Millisecond)
			var se *store.Error
			switch {
			case errors.Is(err, core.ErrOutcomeUnknown):
				t.Errorf("a queued call was sent: %v", err)
			case !errors.As(err, &se) || !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("a queued call at its deadline: err = %v, want a *store.Error matching ErrUnavailable and the deadline", err)
			}
		})
	}
	later.Wait()
	proxy.Resume()
	wg.Wait()
	want := int64(1 + first)
	if n := settle(t, direct, key, want); n != want {
		t.Fatalf("%d calls in flight and %d held back ran the script %d times (plus the warm-up), want %d", first, queued, n-1, first)
	}
}

// A sentinel client gets no dedicated connections (one would outlive a
// failover), but its many callers share batches all the same, and every
// call runs once.
func TestSentinelBatches(t *testing.T) {
	h := harness{addrs: []string{testenv.RedisSentinelAddr(t)}, master: testenv.SentinelMaster}
	c := h.client(t)
	s := valkey.New(c, nil)
	t.Cleanup(func() { _ = s.Close() })
	key := freshKey(t, c)
	p := core.PerSecond("sentinel-batches", 5)
	args := core.NewScriptArgs(&p, 1, 1)
	callers, each := valkey.BatchFrom()+32, 20
	runCallers(t, s, key, args, callers, each)
	if n, want := runs(t, c, key), int64(callers*each); n != want {
		t.Fatalf("the script ran %d times, want %d: one a call", n, want)
	}
	if valkey.Batches(s) == 0 {
		t.Fatalf("%d callers over a sentinel client sent no batch", callers)
	}
}

// runCallers runs countScript each times from each of callers goroutines at
// once, and fails the test at the first error.
func runCallers(t *testing.T, s *valkey.Store, key store.Key, args store.ScriptArgs, callers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			for range each {
				// A deadline and no other end, as a Limiter's calls for a
				// caller that cannot cancel have: they take the dedicated
				// connections.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := s.RunScript(ctxend.DeadlineOnly(ctx), countScript, key, args)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Close while the server is silent returns within about a second: the
// store's pipelined connections are closed before they go back to the
// client, so that giving them back does not wait on the server (it waited
// 12 s), and closing waits its second for them all at once.
func TestCloseOnASilentServerReturnsWithinASecond(t *testing.T) {
	for _, tc := range []struct {
		inFlight int
		open     bool // the store's own client (Open), which Close closes too
	}{{0, false}, {40, false}, {0, true}} {
		t.Run(fmt.Sprintf("%d calls in flight, Open %v", tc.inFlight, tc.open), func(t *testing.T) {
			inFlight := tc.inFlight
			proxy, s, _, key, args := proxiedStore(t)
			if tc.open {
				var err error
				if s, err = valkey.Open(valkeygo.ClientOption{InitAddress: []string{proxy.Addr()}, DisableCache: true}, nil); err != nil {
					t.Fatal(err)
				}
			}
			waitPipesUp(t, s)
			// Dedicated connections, idle again once these return.
			runCallers(t, s, key, args, 4, 10)
			proxy.Stall()
			var wg sync.WaitGroup
			for range inFlight {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
					defer cancel()
					_, _ = s.RunScript(ctx, countScript, key, args)
				})
			}
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			wg.Wait()
			proxy.Resume()
			if most := map[bool]time.Duration{false: 1500 * time.Millisecond, true: 2500 * time.Millisecond}[tc.open]; took > most {
				t.Errorf("Close took %v on a silent server, want at most %v", took, most)
			}
		})
	}
}
