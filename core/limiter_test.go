package core

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

var testPolicy = Policy{Name: "api", Limit: 5, Window: time.Second}

func newTestLimiter(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	if cfg.Policy.Name == "" {
		cfg.Policy = testPolicy
	}
	if cfg.Algorithm == nil {
		cfg.Algorithm = counter{}
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func TestNewRejectsBadConfig(t *testing.T) {
	s := newMapStore()
	tests := []struct {
		name string
		cfg  Config
		is   error
	}{
		{"no algorithm", Config{Policy: testPolicy, Store: s}, nil},
		{"no store", Config{Policy: testPolicy, Algorithm: counter{}}, nil},
		{"bad policy", Config{Policy: Policy{Name: "x", Limit: 0, Window: time.Second}, Algorithm: counter{}, Store: s}, ErrInvalidPolicy},
		{"fallback without limiter", Config{Policy: testPolicy, Algorithm: counter{}, Store: s, Failure: FailFallback}, nil},
		{"unknown failure mode", Config{Policy: testPolicy, Algorithm: counter{}, Store: s, Failure: 9}, nil},
		{"brace in prefix", Config{Policy: testPolicy, Algorithm: counter{}, Store: s, Prefix: "app{1}"}, nil},
		{"space in prefix", Config{Policy: testPolicy, Algorithm: counter{}, Store: s, Prefix: "my app"}, nil},
		{"long prefix", Config{Policy: testPolicy, Algorithm: counter{}, Store: s, Prefix: strings.Repeat("p", 65)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(tt.cfg)
			if err == nil || l != nil {
				t.Fatalf("New() = %v, %v; want an error", l, err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("New() error %v does not match %v", err, tt.is)
			}
		})
	}
}

func TestAllowNBadInputWritesNothing(t *testing.T) {
	s := newMapStore()
	l := newTestLimiter(t, Config{Store: s})
	ctx := context.Background()
	for _, tc := range []struct {
		key string
		n   int64
	}{{"", 1}, {"k", 0}, {"k", -3}, {"k", 6}} {
		d, err := l.AllowN(ctx, tc.key, tc.n)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("AllowN(%q, %d) error = %v, want ErrInvalidInput", tc.key, tc.n, err)
		}
		if d.Allowed {
			t.Errorf("AllowN(%q, %d) allowed", tc.key, tc.n)
		}
	}
	if s.updates != 0 || s.keys() != 0 {
		t.Fatalf("bad input reached the store: %d updates, %d keys", s.updates, s.keys())
	}
	if _, err := l.AllowN(ctx, "k", 5); err != nil {
		t.Fatalf("n == quota must be allowed: %v", err)
	}
}

func TestAllowCountsAndDenies(t *testing.T) {
	l := newTestLimiter(t, Config{Store: newMapStore()})
	ctx := context.Background()
	for i := int64(1); i <= 5; i++ {
		d, err := l.Allow(ctx, "k")
		if err != nil || !d.Allowed || d.Remaining != 5-i || d.Limit != 5 {
			t.Fatalf("call %d: %+v, %v", i, d, err)
		}
	}
	d, err := l.Allow(ctx, "k")
	if err != nil || d.Allowed {
		t.Fatalf("6th call: %+v, %v; want a denial without error", d, err)
	}
	if d, _ := l.Allow(ctx, "other"); !d.Allowed {
		t.Fatalf("another identity shares the counter")
	}
}

func TestConcurrentAllowNeverOverAdmits(t *testing.T) {
	l := newTestLimiter(t, Config{Store: newMapStore(), Policy: Policy{Name: "api", Limit: 25, Window: time.Second}})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			d, err := l.Allow(context.Background(), "k")
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 25 {
		t.Fatalf("admitted %d, want exactly 25", got)
	}
}

func TestFailureModes(t *testing.T) {
	boom := &store.Error{Op: "update", Err: errors.New("connection refused")}
	ctx := context.Background()

	t.Run("closed", func(t *testing.T) {
		l := newTestLimiter(t, Config{Store: &mapStore{err: boom}})
		d, err := l.Allow(ctx, "k")
		if !errors.Is(err, ErrUnavailable) || d.Allowed {
			t.Fatalf("got %+v, %v; want a denial with ErrUnavailable", d, err)
		}
	})
	t.Run("closed wraps a bare error", func(t *testing.T) {
		l := newTestLimiter(t, Config{Store: &mapStore{err: errors.New("bare")}})
		if _, err := l.Allow(ctx, "k"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v; want it to match ErrUnavailable", err)
		}
	})
	t.Run("open", func(t *testing.T) {
		var seen atomic.Pointer[Event]
		l := newTestLimiter(t, Config{Store: &mapStore{err: boom}, Failure: FailOpen,
			Observer: func(e Event) { seen.Store(&e) }})
		d, err := l.Allow(ctx, "k")
		if err != nil || !d.Allowed || !d.Degraded || d.Limit != 5 {
			t.Fatalf("got %+v, %v; want a degraded admission", d, err)
		}
		if e := seen.Load(); e == nil || !e.Decision.Degraded || !errors.Is(e.Err, ErrUnavailable) {
			t.Fatalf("observer did not hear the degraded decision and the store's error: %+v", e)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		fb := newTestLimiter(t, Config{Store: newMapStore(), Policy: Policy{Name: "api", Limit: 2, Window: time.Second}})
		l := newTestLimiter(t, Config{Store: &mapStore{err: boom}, Failure: FailFallback, Fallback: fb})
		for i := range 3 {
			d, err := l.Allow(ctx, "k")
			if err != nil || !d.Degraded || d.Allowed != (i < 2) {
				t.Fatalf("call %d: %+v, %v; want the fallback's decision, degraded", i, d, err)
			}
		}
	})
	t.Run("bad input is not a store failure", func(t *testing.T) {
		l := newTestLimiter(t, Config{Store: &mapStore{err: boom}, Failure: FailOpen})
		if d, err := l.AllowN(ctx, "k", 0); !errors.Is(err, ErrInvalidInput) || d.Allowed {
			t.Fatalf("got %+v, %v; fail open must not admit bad input", d, err)
		}
	})
}

func TestDeadline(t *testing.T) {
	l := newTestLimiter(t, Config{Store: &mapStore{block: true}, Timeout: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(context.Background(), "k")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v; want ErrUnavailable wrapping the deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a store that hangs held the call past its deadline")
	}
}

// deadlineStore records the deadline each call saw.
type deadlineStore struct {
	mapStore
	mu       sync.Mutex
	deadline time.Time
	had      bool
}

func (s *deadlineStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	s.mu.Lock()
	s.deadline, s.had = ctx.Deadline()
	s.mu.Unlock()
	return nil
}

func TestDeadlineIsTheSoonerOfTwo(t *testing.T) {
	s := &deadlineStore{}
	l := newTestLimiter(t, Config{Store: s, Timeout: time.Hour})
	_, _ = l.Allow(context.Background(), "k")
	if !s.had || time.Until(s.deadline) < 59*time.Minute {
		t.Fatalf("no caller deadline: the store saw %v (had %v), want the limiter's hour", s.deadline, s.had)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	_, _ = l.Allow(ctx, "k")
	if !s.deadline.Equal(want) {
		t.Fatalf("a caller deadline sooner than Timeout: the store saw %v, want the caller's %v", s.deadline, want)
	}
	l = newTestLimiter(t, Config{Store: s, Timeout: time.Millisecond})
	_, _ = l.Allow(ctx, "k")
	if time.Until(s.deadline) > 10*time.Millisecond {
		t.Fatalf("a caller deadline later than Timeout: the store saw %v, want the limiter's 1ms", s.deadline)
	}
}

func TestCallerCancellation(t *testing.T) {
	l := newTestLimiter(t, Config{Store: &mapStore{block: true}, Timeout: -1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want it to wrap context.Canceled", err)
	}
}

// A caller whose context ended gets ctx.Err(), not the failure policy: fail
// open must not admit, and the fallback must not spend a slot, for a client
// that is gone. The store wraps the context error as the contract asks.
func TestCallerGoneSkipsFailurePolicy(t *testing.T) {
	fb := newTestLimiter(t, Config{Store: newMapStore()})
	for _, mode := range []FailureMode{FailOpen, FailFallback} {
		l := newTestLimiter(t, Config{Store: &mapStore{block: true}, Failure: mode, Fallback: fb, Algorithm: counter{}})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d, err := l.Allow(ctx, "k")
		if !errors.Is(err, context.Canceled) || d.Allowed || d.Degraded {
			t.Errorf("%v: got %+v, %v; want context.Canceled and no decision", mode, d, err)
		}
	}
	if d, _ := fb.AllowN(context.Background(), "k", 5); !d.Allowed {
		t.Fatalf("the fallback spent a unit on a cancelled caller: %+v", d)
	}
	// The limiter's own deadline is a store failure: fail open admits.
	l := newTestLimiter(t, Config{Store: &mapStore{block: true}, Failure: FailOpen, Timeout: time.Millisecond})
	if d, err := l.Allow(context.Background(), "k"); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("own deadline under fail open: %+v, %v; want a degraded admission", d, err)
	}
}

func TestAcquireRelease(t *testing.T) {
	s := newMapStore()
	l := newTestLimiter(t, Config{Store: s, Algorithm: slots{}, Policy: Policy{Name: "inflight", Limit: 2, Window: time.Second}})
	ctx := context.Background()
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Allow on a Leaser: %v; want ErrUnsupported", err)
	}
	a, d, err := l.Acquire(ctx, "k")
	if err != nil || !d.Allowed || a == nil || a.ID() == 0 {
		t.Fatalf("first Acquire: %v %+v %v", a, d, err)
	}
	b, _, _ := l.Acquire(ctx, "k")
	c, d, err := l.Acquire(ctx, "k")
	if err != nil || d.Allowed || c != nil {
		t.Fatalf("third Acquire on a limit of 2: %v %+v %v; want denied", c, d, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Release(cancelled); err != nil {
		t.Fatalf("Release with a cancelled context must still release: %v", err)
	}
	if err := a.Release(ctx); !errors.Is(err, ErrLeaseReleased) {
		t.Fatalf("second Release: %v; want ErrLeaseReleased", err)
	}
	if c, d, _ = l.Acquire(ctx, "k"); !d.Allowed {
		t.Fatalf("Acquire after a release: %+v; want admitted", d)
	}
	_ = b.Release(ctx)
	_ = c.Release(ctx)
	if _, _, err := newTestLimiter(t, Config{Store: s}).Acquire(ctx, "k"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Acquire on a rate algorithm: %v; want ErrUnsupported", err)
	}
}

func TestAcquireFailOpenLeaseIsNoop(t *testing.T) {
	l := newTestLimiter(t, Config{Store: &mapStore{err: errors.New("down")}, Algorithm: slots{}, Failure: FailOpen,
		Policy: Policy{Name: "inflight", Limit: 1, Window: time.Second}})
	ls, d, err := l.Acquire(context.Background(), "k")
	if err != nil || !d.Allowed || !d.Degraded || ls == nil {
		t.Fatalf("got %v %+v %v; want a degraded lease", ls, d, err)
	}
	if err := ls.Release(context.Background()); err != nil {
		t.Fatalf("Release of a degraded lease: %v", err)
	}
}

func TestReset(t *testing.T) {
	s := newMapStore()
	l := newTestLimiter(t, Config{Store: s})
	ctx := context.Background()
	_, _ = l.AllowN(ctx, "k", 5)
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.AllowN(ctx, "k", 5); !d.Allowed {
		t.Fatalf("after Reset the quota is not whole: %+v", d)
	}
	if err := l.Reset(ctx, ""); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("Reset(\"\") = %v", err)
	}
}

type scriptStore struct {
	*mapStore
	got store.ScriptArgs
}

func (s *scriptStore) RunScript(ctx context.Context, sc *store.Script, key store.Key, a store.ScriptArgs) (store.ScriptResult, error) {
	s.got = a
	return store.ScriptResult{1, 5, 4, 0, 200000, 0}, nil
}

type scriptedCounter struct{ counter }

var testScript = store.NewScript("counter", "return {1}")

func (scriptedCounter) Script() *store.Script { return testScript }

func TestScriptPath(t *testing.T) {
	s := &scriptStore{mapStore: newMapStore()}
	l := newTestLimiter(t, Config{Store: s, Algorithm: scriptedCounter{}})
	d, err := l.AllowN(context.Background(), "k", 2)
	want := Decision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 200 * time.Millisecond}
	if err != nil || d != want {
		t.Fatalf("got %+v, %v; want %+v", d, err, want)
	}
	if s.got.Now != 0 || s.got.N != 2 || s.got.Limit != 5 || s.got.Window != 1e6 || s.got.Interval != 200000 {
		t.Fatalf("args %+v; want server time (0), n 2 and the policy", s.got)
	}
	clock := NewManualClock(time.UnixMicro(1_700_000_000_000_000))
	l = newTestLimiter(t, Config{Store: s, Algorithm: scriptedCounter{}, Clock: clock})
	_, _ = l.Allow(context.Background(), "k")
	if s.got.Now != 1_700_000_000_000_000 {
		t.Fatalf("injected clock not passed: Now = %d", s.got.Now)
	}
	l = newTestLimiter(t, Config{Store: s, Algorithm: scriptedCounter{}, NoScript: true})
	if _, _ = l.Allow(context.Background(), "k"); s.updates != 1 {
		t.Fatalf("NoScript did not take the generic path")
	}
	if testScript.Hash != "9c8545b8579e405965831fc6d1e3d0b3ac248d51" {
		t.Fatalf("script hash %q", testScript.Hash)
	}
}

// bindStore is a mapStore with the Binder fast path, recording each Take.
type bindStore struct {
	*mapStore
	bound []string // namespaces bound
	takes int
	now   int64 // of the last Take
	err   error // returned by every Take when set
}

func (*bindStore) InProcess() {}

func (s *bindStore) Bind(ns string) taker {
	s.bound = append(s.bound, ns)
	return bindTaker{s, ns}
}

// remoteBinder is a Binder that is not InProcess: a Limiter must not bind.
type remoteBinder struct{ *mapStore }

func (remoteBinder) Bind(string) taker { panic("a Limiter bound to a store that is not InProcess") }

type bindTaker struct {
	s  *bindStore
	ns string
}

func (t bindTaker) Take(id string, alg Algorithm, now, n int64, p *Policy) (Decision, error) {
	t.s.takes++
	t.s.now = now
	if t.s.err != nil {
		return Decision{}, t.s.err
	}
	m := &mutation{alg: alg, p: p, n: n, now: now}
	err := t.s.Update(context.Background(), store.Key{Namespace: t.ns, Identity: id}, m)
	return m.d, err
}

func TestBinderPath(t *testing.T) {
	ctx := context.Background()
	clock := NewManualClock(time.UnixMicro(1_700_000_000_000_000))
	s := &bindStore{mapStore: newMapStore()}
	l := newTestLimiter(t, Config{Store: s, Clock: clock, Prefix: "p"})
	if len(s.bound) != 1 || s.bound[0] != "p:api" {
		t.Fatalf("bound %q; want the limiter's namespace once", s.bound)
	}
	for i := range 6 {
		d, err := l.Allow(ctx, "k")
		if err != nil || d.Allowed != (i < 5) {
			t.Fatalf("call %d: %+v, %v", i, d, err)
		}
	}
	if s.takes != 6 || s.now != 1_700_000_000_000_000 {
		t.Fatalf("takes %d, now %d; want every Allow through Take at the limiter's clock", s.takes, s.now)
	}
	// Reset deletes the key Take wrote.
	if err := l.Reset(ctx, "k"); err != nil || s.keys() != 0 {
		t.Fatalf("Reset: %v, %d keys left", err, s.keys())
	}

	// A Take that fails goes to the failure policy, and the observer hears it.
	boom := &store.Error{Op: "update", Err: errors.New("full")}
	var seen atomic.Pointer[Event]
	s = &bindStore{mapStore: newMapStore(), err: boom}
	l = newTestLimiter(t, Config{Store: s, Failure: FailOpen, Observer: func(e Event) { seen.Store(&e) }})
	if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("got %+v, %v; want a degraded admission", d, err)
	}
	if e := seen.Load(); e == nil || !errors.Is(e.Err, boom) || s.takes != 1 {
		t.Fatalf("observer heard %+v after %d takes", e, s.takes)
	}
	l = newTestLimiter(t, Config{Store: s})
	if _, err := l.Allow(ctx, "k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fail closed: err = %v", err)
	}
	// Bad input never reaches the store.
	if _, err := l.AllowN(ctx, "k", 0); !errors.Is(err, ErrInvalidInput) || s.takes != 2 {
		t.Fatalf("AllowN(0): %v after %d takes", err, s.takes)
	}

	// A store that waits on I/O decides through Update, with a deadline,
	// whatever it implements.
	rb := remoteBinder{mapStore: newMapStore()}
	l = newTestLimiter(t, Config{Store: rb})
	if _, err := l.Allow(ctx, "k"); err != nil || rb.updates != 1 {
		t.Fatalf("a Binder that is not InProcess: %v, %d updates", err, rb.updates)
	}

	// Leases go through Update, not Take.
	s = &bindStore{mapStore: newMapStore()}
	ll := newTestLimiter(t, Config{Store: s, Algorithm: slots{}})
	_, d, err := ll.Acquire(ctx, "k")
	if err != nil || !d.Allowed || s.takes != 0 || len(s.bound) != 0 || s.updates != 1 {
		t.Fatalf("Acquire: %+v, %v; takes %d, bound %q, updates %d", d, err, s.takes, s.bound, s.updates)
	}
}

// ctxStore records the context each call saw and, when block is set, waits
// for it to end.
type ctxStore struct {
	mapStore
	mu    sync.Mutex
	ctxs  []context.Context
	block bool
}

func (s *ctxStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	s.mu.Lock()
	s.ctxs = append(s.ctxs, ctx)
	s.mu.Unlock()
	if s.block {
		<-ctx.Done()
		return &store.Error{Op: "update", Err: ctx.Err()}
	}
	return nil
}

type ctxKey struct{}

func TestSharedDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	s := &ctxStore{}
	l := newTestLimiter(t, Config{Store: s, Timeout: timeout})
	start := time.Now()
	for range 3 {
		_, _ = l.Allow(context.Background(), "k")
	}
	valued := context.WithValue(context.Background(), ctxKey{}, "v")
	_, _ = l.Allow(valued, "k")
	end := time.Now()
	for i, ctx := range s.ctxs {
		dl, ok := ctx.Deadline()
		if !ok || dl.Before(start.Add(timeout)) || dl.After(end.Add(timeout+timeout/64)) {
			t.Fatalf("call %d: deadline %v, %v; want %v after the call, late by at most %v", i, dl.Sub(start), ok, timeout, timeout/64)
		}
		if ctx.Done() == nil || ctx.Err() != nil {
			t.Fatalf("call %d: Done %v, Err %v before the deadline", i, ctx.Done(), ctx.Err())
		}
	}
	if v := s.ctxs[3].Value(ctxKey{}); v != "v" {
		t.Fatalf("the store lost the caller's value: %v", v)
	}
	// A context the store derives hangs off the deadline, with no goroutine
	// of its own to watch it.
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for _, ctx := range s.ctxs {
		for range 25 {
			_, cancel := context.WithCancel(ctx)
			cancels = append(cancels, cancel)
		}
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Errorf("deriving 100 contexts started %d goroutines", n)
	}
	derived, cancel := context.WithCancel(s.ctxs[3])
	cancels = append(cancels, cancel)
	select {
	case <-derived.Done():
		if !errors.Is(derived.Err(), context.DeadlineExceeded) {
			t.Fatalf("derived context ended with %v", derived.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a derived context outlived the shared deadline")
	}
	for _, ctx := range s.ctxs {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("after the deadline Err = %v", ctx.Err())
		}
	}
	for _, c := range cancels {
		c()
	}

	// It costs no allocation for context.Background, one for a context
	// with values (the ticks, one a granule, round away).
	for _, c := range []struct {
		ctx  context.Context
		want float64
	}{{context.Background(), 0}, {valued, 1}} {
		if n := testing.AllocsPerRun(1000, func() {
			ctx, cancel := l.deadline(c.ctx)
			_ = ctx.Done()
			cancel()
		}); n != c.want {
			t.Errorf("%v: %v allocations a call, want %v", c.ctx, n, c.want)
		}
	}
}

// A Timeout too long to add to the clock still gives a deadline in the
// future, not one in the past.
func TestHugeTimeout(t *testing.T) {
	s := &ctxStore{}
	l := newTestLimiter(t, Config{Store: s, Timeout: math.MaxInt64})
	if _, err := l.Allow(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	dl, ok := s.ctxs[0].Deadline()
	if err := s.ctxs[0].Err(); err != nil || !ok || time.Until(dl) < 100*365*24*time.Hour {
		t.Fatalf("deadline %v (%v), Err %v; want one centuries away", dl, ok, err)
	}
}

// A caller that can cancel gets its cancellation through to the store at
// once, not at the limiter's deadline.
func TestCancellationReachesTheStore(t *testing.T) {
	s := &ctxStore{block: true}
	l := newTestLimiter(t, Config{Store: s, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, "k")
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the store did not hear the caller's cancellation")
	}
}
