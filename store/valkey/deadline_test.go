package valkey_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// countScript is a test script that counts its own runs in KEYS[1], so a
// test can see on the server how many times a decision was executed.
var countScript = store.NewScript("test-count", `redis.call('INCR', KEYS[1])
return {1, 1, 0, 0, 0, 0}`)

// stalledDeadline is the deadline of calls whose replies the proxy holds.
const stalledDeadline = 200 * time.Millisecond

// lateBound is how late after its deadline a call may return before the
// test calls it hung. Generous: the machine may be loaded; a call that
// ignores its deadline would wait for the stall, which never ends by
// itself.
const lateBound = 5 * time.Second

// runByDeadline runs countScript on key with a deadline of
// stalledDeadline, and reports an error when the call returns more than
// lateBound after it.
func runByDeadline(t *testing.T, s *valkey.Store, key store.Key, args store.ScriptArgs) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stalledDeadline)
	defer cancel()
	start := time.Now()
	_, err := s.RunScript(ctx, countScript, key, args)
	if late := time.Since(start) - stalledDeadline; late > lateBound {
		t.Errorf("RunScript returned %v after its deadline", late)
	}
	return err
}

// runs reads countScript's counter.
func runs(t *testing.T, c valkeygo.Client, key store.Key) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Get().Key(key.String()).Build()).AsInt64()
	if valkeygo.IsValkeyNil(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// settle polls the counter until it reaches want or stops moving for a
// second (at most five seconds in all), and returns it.
func settle(t *testing.T, c valkeygo.Client, key store.Key, want int64) int64 {
	t.Helper()
	last, still := runs(t, c, key), 0
	for i := 0; i < 500 && last != want && still < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		n := runs(t, c, key)
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	return last
}

// stalledClient is a valkey-go client through proxy on one pipelined
// connection (PipelineMultiplex -1 means 2^0), so that once a call has
// opened it, every later call shares the connection a Stall holds.
func stalledClient(t *testing.T, proxy *stallProxy, always bool) valkeygo.Client {
	t.Helper()
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{proxy.Addr()}, DisableCache: true,
		PipelineMultiplex: -1, AlwaysPipelining: always})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func checkUnknown(t *testing.T, err error) {
	t.Helper()
	var se *store.Error
	if !errors.As(err, &se) || !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, core.ErrOutcomeUnknown) {
		t.Errorf("err = %v, want a *store.Error matching ErrUnavailable and ErrOutcomeUnknown", err)
	}
}

// TestDeadlineReplyLost: the server runs the script but its reply is held
// back. The call returns at its deadline with an unknown outcome, and the
// script ran exactly once: neither the store nor valkey-go sent it again.
func TestDeadlineReplyLost(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	proxy := newStallProxy(t, addr)
	s := valkey.New(stalledClient(t, proxy, false), nil)
	direct := newClient(t, []string{addr})
	key := freshKey(t, direct)
	p := core.PerSecond("deadline", 5)
	args := core.NewScriptArgs(&p, 1, 1)
	// Connect and load the script first, so the stalled call is one EVALSHA.
	if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
		t.Fatal(err)
	}
	waitPipesUp(t, s)
	proxy.Stall()
	err := runByDeadline(t, s, key, args)
	checkUnknown(t, err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to wrap context.DeadlineExceeded", err)
	}
	if n := settle(t, direct, key, 2); n != 2 {
		t.Fatalf("the script ran %d times in all, want 2 (warm-up + the stalled call, once)", n)
	}

	proxy.Resume()
	if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
		t.Fatalf("after the stall: %v", err)
	}
	if n := runs(t, direct, key); n != 3 {
		t.Fatalf("after one more call the script ran %d times, want 3", n)
	}
}

// TestConnectionDropped: the connection breaks after the server ran the
// script and before its reply arrived, well within the deadline. valkey-go
// retries a retryable command after such a network error, on a new
// connection; the script is not one, so the call fails with an unknown
// outcome and the server counts one run.
func TestConnectionDropped(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	proxy := newStallProxy(t, addr)
	s := valkey.New(stalledClient(t, proxy, false), nil)
	direct := newClient(t, []string{addr})
	key := freshKey(t, direct)
	p := core.PerSecond("dropped", 5)
	args := core.NewScriptArgs(&p, 1, 1)
	if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
		t.Fatal(err)
	}
	waitPipesUp(t, s) // one made after the Stall would carry the reply
	proxy.Stall()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := s.RunScript(ctx, countScript, key, args)
		done <- err
	}()
	if n := settle(t, direct, key, 2); n != 2 {
		t.Fatalf("the stalled call ran %d times on the server, want 1", n-1)
	}
	proxy.Drop()
	select {
	case err := <-done:
		checkUnknown(t, err)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v: the drop, not the deadline, should have ended the call", err)
		}
	case <-time.After(lateBound):
		t.Fatal("RunScript did not return after its connection was dropped")
	}
	if n := settle(t, direct, key, 3); n != 2 {
		t.Fatalf("after the drop the script had run %d times, want 2: it was sent again", n)
	}
	// A connection that broke while idle is found only when a command is
	// next sent on it (nothing reads it meanwhile), so a call or two after
	// the drop may fail so, with an unknown outcome, before one succeeds.
	failed := 0
	for {
		_, err := s.RunScript(context.Background(), countScript, key, args)
		if err == nil {
			break
		}
		checkUnknown(t, err)
		if failed++; failed == 5 {
			t.Fatalf("after the drop, %d calls failed, the last with: %v", failed, err)
		}
	}
	if n := runs(t, direct, key); n < 3 || n > int64(3+failed) {
		t.Fatalf("after %d more calls the script ran %d times, want 3 to %d", failed+1, n, 3+failed)
	}
}

// TestDeadlineReplyLostPipelined: many concurrent calls share the client's
// pipelined connection when its replies stop. Each call either succeeds
// (valkey-go gave up the broken connection and sent it on a new one before
// it was sent on the old), returns an unknown outcome within its deadline,
// or, held back for a batch, was never sent and says so; none runs twice. With AlwaysPipelining over one connection,
// every call queues on the stalled connection and every one must lose its
// reply.
func TestDeadlineReplyLostPipelined(t *testing.T) {
	for _, always := range []bool{false, true} {
		name := "default"
		if always {
			name = "AlwaysPipelining"
		}
		t.Run(name, func(t *testing.T) {
			addr := backends[0].addrs(t)[0]
			proxy := newStallProxy(t, addr)
			var c valkeygo.Client
			if always {
				c = stalledClient(t, proxy, true)
			} else {
				c = newClient(t, []string{proxy.Addr()}) // several connections, opened as needed
			}
			s := valkey.New(c, nil)
			direct := newClient(t, []string{addr})
			key := freshKey(t, direct)
			p := core.PerSecond("deadline", 5)
			args := core.NewScriptArgs(&p, 1, 1)
			if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
				t.Fatal(err)
			}
			waitPipesUp(t, s)
			proxy.Stall()
			const calls = 50
			var wg sync.WaitGroup
			var lost, unsent atomic.Int64
			for range calls {
				wg.Go(func() {
					err := runByDeadline(t, s, key, args)
					switch {
					case err == nil:
					case !errors.Is(err, core.ErrOutcomeUnknown) && errors.Is(err, context.DeadlineExceeded):
						unsent.Add(1) // held back in a batcher's queue (TestBatchedCallsNeverSentAtTheirDeadline)
					default:
						lost.Add(1)
						checkUnknown(t, err)
					}
				})
			}
			wg.Wait()
			if lost.Load() == 0 || (always && lost.Load()+unsent.Load() != calls) {
				t.Errorf("%d of %d calls lost their reply, %d were not sent", lost.Load(), calls, unsent.Load())
			}
			n := settle(t, direct, key, 1+calls-unsent.Load())
			if n > 1+calls-unsent.Load() {
				t.Fatalf("%d calls, %d of them not sent, ran the script %d times (plus the warm-up): some ran twice", calls, unsent.Load(), n-1)
			}
			proxy.Resume()
			if _, err := s.RunScript(context.Background(), countScript, key, args); err != nil {
				t.Fatalf("after the stall: %v", err)
			}
			if m := settle(t, direct, key, n+1); m != n+1 {
				t.Fatalf("one more call moved the counter from %d to %d: a lost call was sent again", n, m)
			}
		})
	}
}

// TestDeadlineThroughLimiter: a Limiter whose store's replies stall gets an
// unknown outcome at its deadline and hands it to its failure policy: fail
// closed returns it, fail open admits and marks the decision Degraded.
func TestDeadlineThroughLimiter(t *testing.T) {
	addr := backends[0].addrs(t)[0]
	proxy := newStallProxy(t, addr)
	s := valkey.New(stalledClient(t, proxy, false), nil)
	for _, mode := range []core.FailureMode{core.FailClosed, core.FailOpen} {
		t.Run(mode.String(), func(t *testing.T) {
			l, err := core.New(core.Config{Policy: core.PerSecond("deadline", 5), Algorithm: algorithm.GCRA{}, Store: s,
				Prefix: "sluice-valkey-test-" + randomHex(t), Timeout: stalledDeadline, Failure: mode})
			if err != nil {
				t.Fatal(err)
			}
			id := randomHex(t)
			if _, err := l.Allow(context.Background(), id); err != nil { // connect, load the script
				t.Fatal(err)
			}
			waitPipesUp(t, s)
			proxy.Stall()
			defer proxy.Resume()
			start := time.Now()
			d, err := l.Allow(context.Background(), id)
			if late := time.Since(start) - stalledDeadline; late > lateBound {
				t.Errorf("Allow returned %v after its deadline", late)
			}
			switch mode {
			case core.FailClosed:
				checkUnknown(t, err)
				if d.Allowed {
					t.Errorf("fail closed admitted: %+v", d)
				}
			case core.FailOpen:
				if err != nil || !d.Allowed || !d.Degraded {
					t.Errorf("fail open: %+v, %v; want admitted, Degraded, no error", d, err)
				}
			}
		})
	}
}
