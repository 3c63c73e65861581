package guard_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/inproc"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// flaky is a store over memory whose calls fail (or hang) on demand, and
// that counts the calls that reached it.
type flaky struct {
	mem   *memory.Store
	calls atomic.Int64
	mu    sync.Mutex
	err   error         // returned by every call while set
	hold  chan struct{} // when set, each call waits on it (or its context)
}

func newFlaky() *flaky { return &flaky{mem: memory.New(nil)} }

func (f *flaky) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *flaky) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	f.calls.Add(1)
	f.mu.Lock()
	err, hold := f.err, f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return store.UnknownOutcome(ctx.Err())
		}
	}
	if err != nil {
		return err
	}
	return f.mem.Update(ctx, key, m)
}

var errDown = &store.Error{Op: "update", Err: errors.New("connection refused")}

func limiter(t *testing.T, s store.Store, mode core.FailureMode) *core.Limiter {
	t.Helper()
	cfg := core.Config{Policy: core.PerSecond("api", 1000), Algorithm: algorithm.GCRA{}, Store: s, Failure: mode}
	if mode == core.FailFallback {
		fb, err := core.New(core.Config{Policy: core.PerSecond("api", 10), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Fallback = fb
	}
	l, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestBreakerOpensAfterConsecutiveFailuresAndFailsAtOnce(t *testing.T) {
	f := newFlaky()
	var changes []string
	var mu sync.Mutex
	br := guard.NewBreaker(f, &guard.BreakerOptions{Cooldown: time.Hour, OnStateChange: func(_ string, from, to guard.State) {
		mu.Lock()
		changes = append(changes, from.String()+"->"+to.String())
		mu.Unlock()
	}})
	l := limiter(t, br.Store(), core.FailClosed)
	ctx := context.Background()
	f.set(errDown)
	for i := range guard.DefaultConsecutiveFailures {
		if br.State() != guard.Closed {
			t.Fatalf("open after %d failures, want %d", i, guard.DefaultConsecutiveFailures)
		}
		if _, err := l.Allow(ctx, "a"); !errors.Is(err, core.ErrUnavailable) || errors.Is(err, guard.ErrOpen) {
			t.Fatalf("call %d: err %v, want the store's own error", i, err)
		}
	}
	if br.State() != guard.Open {
		t.Fatalf("state %v after %d failures, want open", br.State(), guard.DefaultConsecutiveFailures)
	}
	before := f.calls.Load()
	_, err := l.Allow(ctx, "a")
	if !errors.Is(err, guard.ErrOpen) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("open breaker: err %v, want ErrOpen and ErrUnavailable", err)
	}
	if errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("open breaker: err %v matches ErrOutcomeUnknown, but nothing was sent", err)
	}
	if f.calls.Load() != before {
		t.Fatalf("open breaker sent %d calls to the store", f.calls.Load()-before)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(changes) != "[closed->open]" {
		t.Fatalf("OnStateChange heard %v, want [closed->open]", changes)
	}
}

func TestBreakerOpenLetsTheFailureModeDecideAtOnce(t *testing.T) {
	for _, mode := range []core.FailureMode{core.FailOpen, core.FailFallback, core.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFlaky()
			f.hold = make(chan struct{}) // a stall: every call waits for its deadline
			br := guard.NewBreaker(f, &guard.BreakerOptions{Cooldown: time.Hour})
			l := limiter(t, br.Store(), mode)
			ctx := context.Background()
			for range guard.DefaultConsecutiveFailures {
				_, _ = l.Allow(ctx, "a")
			}
			if br.State() != guard.Open {
				t.Fatalf("state %v after %d stalled calls, want open", br.State(), guard.DefaultConsecutiveFailures)
			}
			var slowest time.Duration
			for range 100 {
				start := time.Now()
				d, err := l.Allow(ctx, "a")
				slowest = max(slowest, time.Since(start))
				switch mode {
				case core.FailClosed:
					if !errors.Is(err, guard.ErrOpen) {
						t.Fatalf("err %v, want ErrOpen", err)
					}
				default:
					if err != nil || !d.Degraded {
						t.Fatalf("got %+v, %v; want a degraded decision", d, err)
					}
				}
			}
			// The stalled store takes DefaultTimeout (100 ms) a call; an
			// open breaker must not come near it.
			if slowest > core.DefaultTimeout/4 {
				t.Fatalf("slowest call while open took %v, want well under the %v Timeout", slowest, core.DefaultTimeout)
			}
		})
	}
}

func TestBreakerOpensOnFailureRatio(t *testing.T) {
	f := newFlaky()
	br := guard.NewBreaker(f, &guard.BreakerOptions{ConsecutiveFailures: -1, MinCalls: 20, FailureRatio: 0.5, Cooldown: time.Hour})
	s := br.Store()
	m := &step{}
	ctx := context.Background()
	for i := range 19 {
		if i%2 == 1 {
			f.set(errDown)
		} else {
			f.set(nil)
		}
		_ = s.Update(ctx, store.Key{Namespace: "n", Identity: "a"}, m)
		if br.State() != guard.Closed {
			t.Fatalf("open after %d calls, before MinCalls", i+1)
		}
	}
	f.set(errDown)
	_ = s.Update(ctx, store.Key{Namespace: "n", Identity: "a"}, m) // 20 calls, 10 failed
	if br.State() != guard.Open {
		t.Fatalf("state %v with 10 of 20 calls failed, want open", br.State())
	}
}

// step is a Mutation that writes nothing.
type step struct{}

func (*step) Apply([]byte) ([]byte, time.Duration) { return nil, 0 }

// passedDeadline is a context whose deadline has passed and whose Err
// does not say so yet.
type passedDeadline struct {
	context.Context
	dl time.Time
}

func (c passedDeadline) Deadline() (time.Time, bool) { return c.dl, true }

func TestBreakerCountsOnlyUnavailable(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		ctx  func() context.Context
	}{
		{"not unavailable", errors.New("bad script"), nil},
		{"contention", &store.ContentionError{Attempts: 8}, nil},
		{"caller cancelled", store.UnknownOutcome(context.Canceled), func() context.Context {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFlaky()
			f.set(c.err)
			br := guard.NewBreaker(f, nil)
			for range 3 * guard.DefaultConsecutiveFailures {
				cctx := ctx
				if c.ctx != nil {
					cctx = c.ctx()
				}
				_ = br.Store().Update(cctx, store.Key{Namespace: "n", Identity: "a"}, &step{})
			}
			if br.State() != guard.Closed {
				t.Fatalf("state %v after errors %v, want closed", br.State(), c.err)
			}
		})
	}
	t.Run("the limiter's deadline counts", func(t *testing.T) {
		f := newFlaky()
		f.hold = make(chan struct{}) // a stall
		br := guard.NewBreaker(f, &guard.BreakerOptions{Timeout: 20 * time.Millisecond})
		for range guard.DefaultConsecutiveFailures {
			// A deadline 20 ms longer than Timeout, so that the call still
			// finds at least Timeout left on a loaded machine: it met the
			// Limiter's deadline, not a shorter one of the caller's.
			dctx, cancel := context.WithTimeout(ctx, 40*time.Millisecond)
			_ = br.Store().Update(dctx, store.Key{Namespace: "n", Identity: "a"}, &step{})
			cancel()
		}
		if br.State() != guard.Open {
			t.Fatalf("state %v after %d calls that met their Timeout, want open", br.State(), guard.DefaultConsecutiveFailures)
		}
	})
	t.Run("nor does one a socket met before the context said so", func(t *testing.T) {
		// A client that sets its socket's deadline from the context's
		// (go-redis) may time out at that instant before the context's
		// own timer has fired: the error comes back while ctx.Err() is
		// still nil, the deadline passed.
		f := newFlaky()
		f.set(&store.Error{Op: "script", Err: store.UnknownOutcome(os.ErrDeadlineExceeded)})
		br := guard.NewBreaker(f, &guard.BreakerOptions{Timeout: time.Second})
		for range 2 * guard.DefaultConsecutiveFailures {
			dctx := passedDeadline{ctx, time.Now()}
			_ = br.Store().Update(dctx, store.Key{Namespace: "n", Identity: "a"}, &step{})
		}
		if br.State() != guard.Closed {
			t.Fatalf("state %v after callers' own deadlines met by the socket first, want closed", br.State())
		}
	})
	t.Run("a shorter deadline of the caller's does not", func(t *testing.T) {
		f := newFlaky()
		f.hold = make(chan struct{})
		br := guard.NewBreaker(f, &guard.BreakerOptions{Timeout: time.Second})
		for range 2 * guard.DefaultConsecutiveFailures {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			_ = br.Store().Update(dctx, store.Key{Namespace: "n", Identity: "a"}, &step{})
			cancel()
		}
		if br.State() != guard.Closed {
			t.Fatalf("state %v after callers' own 5 ms deadlines under a 1 s Timeout, want closed", br.State())
		}
	})
}

func TestBreakerHalfOpenProbesAreBounded(t *testing.T) {
	f := newFlaky()
	const cooldown = 50 * time.Millisecond
	br := guard.NewBreaker(f, &guard.BreakerOptions{Cooldown: cooldown, Probes: 2})
	s := br.Store()
	ctx := context.Background()
	key := store.Key{Namespace: "n", Identity: "a"}
	f.set(errDown)
	for range guard.DefaultConsecutiveFailures {
		_ = s.Update(ctx, key, &step{})
	}
	if br.State() != guard.Open {
		t.Fatal("breaker did not open")
	}
	time.Sleep(cooldown + 10*time.Millisecond)
	if br.State() != guard.HalfOpen {
		t.Fatalf("state %v after Cooldown, want half-open", br.State())
	}
	// The store recovers but answers slowly: 2 probes get through, the
	// other calls are refused while they are in flight.
	f.set(nil)
	release := make(chan struct{})
	f.mu.Lock()
	f.hold = release
	f.mu.Unlock()
	before := f.calls.Load()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 10 {
		wg.Go(func() {
			if err := s.Update(ctx, key, &step{}); errors.Is(err, guard.ErrOpen) {
				refused.Add(1)
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for refused.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := f.calls.Load() - before; got != 2 {
		t.Errorf("half-open breaker let %d calls through at once, want Probes = 2", got)
	}
	f.mu.Lock()
	f.hold = nil
	f.mu.Unlock()
	close(release)
	wg.Wait()
	if refused.Load() != 8 {
		t.Errorf("%d calls refused while half-open, want 8", refused.Load())
	}
	if br.State() != guard.Closed {
		t.Fatalf("state %v after 2 successful probes, want closed", br.State())
	}
}

func TestBreakerReopensOnFailedProbe(t *testing.T) {
	f := newFlaky()
	const cooldown = 30 * time.Millisecond
	br := guard.NewBreaker(f, &guard.BreakerOptions{Cooldown: cooldown})
	key := store.Key{Namespace: "n", Identity: "a"}
	f.set(errDown)
	for range guard.DefaultConsecutiveFailures {
		_ = br.Store().Update(context.Background(), key, &step{})
	}
	time.Sleep(cooldown + 10*time.Millisecond)
	if err := br.Store().Update(context.Background(), key, &step{}); errors.Is(err, guard.ErrOpen) {
		t.Fatalf("the first call after Cooldown was refused: %v", err)
	}
	if br.State() != guard.Open {
		t.Fatalf("state %v after a failed probe, want open", br.State())
	}
}

// Each optional interface of the wrapped store is claimed exactly when the
// store has it.
type (
	plain   struct{ store.Store }
	scripty struct {
		store.Store
		store.ScriptRunner
	}
	multiScripty struct {
		store.Store
		store.ScriptRunner
		store.MultiScriptRunner
	}
	full struct {
		store.Store
		store.ScriptRunner
		store.MultiScriptRunner
		store.Deleter
		store.Closer
		store.ClockSkewer
	}
	skewOnly struct {
		store.Store
		store.ClockSkewer
	}
	multiOnly struct {
		store.Store
		store.MultiScriptRunner
	}
)

func TestBreakerClaimsOnlyTheWrappedInterfaces(t *testing.T) {
	mem := memory.New(nil)
	for _, s := range []store.Store{plain{mem}, scripty{Store: mem}, multiScripty{Store: mem}, full{Store: mem, Deleter: mem, Closer: mem, ClockSkewer: mem}, skewOnly{mem, mem}, multiOnly{Store: mem}, mem} {
		w := guard.NewBreaker(s, nil).Store()
		for _, c := range []struct {
			name       string
			have, want bool
		}{
			{"ScriptRunner", is[store.ScriptRunner](w), is[store.ScriptRunner](s)},
			{"MultiScriptRunner", is[store.MultiScriptRunner](w), is[store.MultiScriptRunner](s)},
			{"Deleter", is[store.Deleter](w), is[store.Deleter](s)},
			{"Closer", is[store.Closer](w), is[store.Closer](s)},
			{"ClockSkewer", is[store.ClockSkewer](w), is[store.ClockSkewer](s)},
			{"InProcess", is[inproc.InProcess](w), false},
			{"Binder", is[inproc.Binder](w), false},
		} {
			if c.have != c.want {
				t.Errorf("%T behind a breaker: %s is %v, want %v", s, c.name, c.have, c.want)
			}
		}
	}
}

func is[I any](v any) bool { _, ok := v.(I); return ok }

// multiFlaky is flaky with a multi-limit script runner that fails with it.
type multiFlaky struct{ *flaky }

func (f multiFlaky) RunMultiScript(ctx context.Context, _ *store.Script, keys []store.Key, _ []int64, reply []int64) ([]int64, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return reply, err
	}
	return append(reply, 1), nil
}

// The multi-limit script goes through the breaker: its failures open it,
// and an open breaker refuses it without asking the store.
func TestBreakerGuardsMultiScripts(t *testing.T) {
	f := multiFlaky{newFlaky()}
	br := guard.NewBreaker(f, nil)
	r, ok := br.Store().(store.MultiScriptRunner)
	if !ok {
		t.Fatal("the breaker's store lost the multi-limit script runner")
	}
	keys := []store.Key{{Namespace: "n", Identity: "a"}}
	f.set(errDown)
	for range guard.DefaultConsecutiveFailures {
		if _, err := r.RunMultiScript(context.Background(), nil, keys, nil, nil); !errors.Is(err, errDown) {
			t.Fatalf("RunMultiScript: %v; want the store's error", err)
		}
	}
	if br.State() != guard.Open {
		t.Fatalf("state %v after %d failed multi-limit scripts, want open", br.State(), guard.DefaultConsecutiveFailures)
	}
	calls := f.calls.Load()
	if _, err := r.RunMultiScript(context.Background(), nil, keys, nil, nil); !errors.Is(err, guard.ErrOpen) {
		t.Fatalf("RunMultiScript with the breaker open: %v; want ErrOpen", err)
	}
	if f.calls.Load() != calls {
		t.Fatal("an open breaker passed a multi-limit script to the store")
	}
}

// Options outside what the breaker can count are taken as the nearest it
// can: none panics, none opens it on the first failure, none disables it.
func TestBreakerClampsItsOptions(t *testing.T) {
	key := store.Key{Namespace: "n", Identity: "a"}
	for _, c := range []struct {
		name     string
		opts     guard.BreakerOptions
		openedBy int // failures in a row that must open it (0: must stay closed through 30)
	}{
		{"huge window", guard.BreakerOptions{Window: math.MaxInt64}, guard.DefaultConsecutiveFailures},
		{"tiny window", guard.BreakerOptions{Window: 9}, guard.DefaultConsecutiveFailures},
		{"count past 2^32", guard.BreakerOptions{ConsecutiveFailures: 1 << 32, FailureRatio: -1}, 0},
		{"min calls past 2^32", guard.BreakerOptions{MinCalls: 1 << 32, ConsecutiveFailures: -1}, 0},
		{"ratio above 1", guard.BreakerOptions{FailureRatio: 2, ConsecutiveFailures: -1, MinCalls: 5}, 5},
		{"ratio NaN", guard.BreakerOptions{FailureRatio: math.NaN(), ConsecutiveFailures: -1, MinCalls: 5}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFlaky()
			br := guard.NewBreaker(f, &c.opts)
			f.set(errDown)
			for i := 1; i <= 30; i++ {
				_ = br.Store().Update(context.Background(), key, &step{})
				open := br.State() == guard.Open
				switch {
				case c.openedBy == 0 && open:
					t.Fatalf("opened after %d failures", i)
				case c.openedBy > 0 && i < c.openedBy && open:
					t.Fatalf("opened after %d failures, want %d", i, c.openedBy)
				case c.openedBy > 0 && i >= c.openedBy && !open:
					t.Fatalf("still %v after %d failures, want open after %d", br.State(), i, c.openedBy)
				}
				if open {
					return
				}
			}
		})
	}
}

// A breaker around a nil store hands out a nil store, which core.New
// refuses by name, instead of a wrapper that panics on the first decision.
func TestBreakerOverANilStore(t *testing.T) {
	var typed *memory.Store
	for name, s := range map[string]store.Store{"nil": nil, "typed nil": typed} {
		br := guard.NewBreaker(s, nil)
		defer br.Stop()
		_, err := core.New(core.Config{
			Policy:    core.Policy{Name: "api", Limit: 1, Window: time.Second},
			Algorithm: algorithm.GCRA{}, Store: br.Store(), Failure: core.FailOpen,
		})
		if err == nil || !strings.Contains(err.Error(), "Store is nil") {
			t.Errorf("%s store behind a breaker: core.New: %v, want an error naming the nil store", name, err)
		}
	}
	var zero guard.Breaker
	if got := zero.State(); got != guard.Closed {
		t.Errorf("a zero Breaker's State: %v, want Closed", got)
	}
}
