package redis

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// sendCounter is a go-redis hook that counts the scripts a client sends:
// alone, and in pipelines (with their sizes).
type sendCounter struct {
	mu        sync.Mutex
	alone     int
	pipelines []int
}

func (h *sendCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func isScript(cmd goredis.Cmder) bool {
	n := strings.ToLower(cmd.Name())
	return n == "evalsha" || n == "eval"
}

func (h *sendCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if isScript(cmd) {
			h.mu.Lock()
			h.alone++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *sendCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isScript(c) {
				n++
			}
		}
		h.mu.Lock()
		h.pipelines = append(h.pipelines, n)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *sendCounter) sent() (alone, pipelined, largest int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.pipelines {
		pipelined += n
		largest = max(largest, n)
	}
	return h.alone, pipelined, largest
}

// TestBatcherAlone: calls one after another are each sent at once, alone:
// the batcher adds no pipeline (and no wait) when nothing else is in flight.
func TestBatcherAlone(t *testing.T) {
	s := newStore(t, nil)
	h := &sendCounter{}
	s.Client().AddHook(h)
	sc := algorithm.GCRA{}.Script()
	if err := s.Client().ScriptLoad(ctxT(t), sc.Source).Err(); err != nil { // no NOSCRIPT, no EVAL
		t.Fatal(err)
	}
	key := testKey(t, s.Client())
	p := core.Policy{Name: "t", Limit: 1000, Window: time.Hour}
	for range 20 {
		if _, err := s.RunScript(ctxT(t), sc, key, core.NewScriptArgs(&p, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if alone, pipelined, _ := h.sent(); alone != 20 || pipelined != 0 {
		t.Fatalf("20 serial calls: %d sent alone, %d in pipelines; want 20 alone", alone, pipelined)
	}
}

// TestBatcherCoalesces: concurrent calls share pipelines of at most
// MaxBatch, every call is sent exactly once, and every call gets its own
// reply (the quota of one key is met exactly).
func TestBatcherCoalesces(t *testing.T) {
	const goroutines, each, quota = 64, 20, 500
	s := newStore(t, &Options{Pipelines: 1, MaxBatch: 16})
	h := &sendCounter{}
	s.Client().AddHook(h)
	admin := userClient(t)
	// Load the script first: a NOSCRIPT would send some calls twice
	// (EVALSHA, then EVAL), legitimately.
	sc := algorithm.GCRA{}.Script()
	if err := admin.ScriptLoad(ctxT(t), sc.Source).Err(); err != nil {
		t.Fatal(err)
	}
	key := testKey(t, admin)
	p := core.Policy{Name: "t", Limit: quota, Window: time.Hour}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				r, err := s.RunScript(ctxT(t), sc, key, core.NewScriptArgs(&p, now, 1))
				if err != nil {
					t.Errorf("RunScript: %v", err)
					return
				}
				if core.ScriptDecision(r).Allowed {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	alone, pipelined, largest := h.sent()
	t.Logf("%d calls: %d sent alone, %d in %d pipelines (largest %d)", goroutines*each, alone, pipelined, len(h.pipelines), largest)
	if alone+pipelined != goroutines*each {
		t.Errorf("%d calls sent %d scripts", goroutines*each, alone+pipelined)
	}
	if pipelined == 0 {
		t.Errorf("no call went in a pipeline")
	}
	if largest > 16 {
		t.Errorf("a pipeline of %d calls, MaxBatch 16", largest)
	}
	if admitted != quota {
		t.Errorf("admitted %d, want exactly the quota %d", admitted, quota)
	}
}

// TestBatcherDeadlines: with the only lane stuck on a silent server, queued
// calls leave at their own deadlines, and say that nothing was sent: no
// unknown outcome. The call on the lane reports an unknown outcome.
func TestBatcherDeadlines(t *testing.T) {
	p := newProxy(t, "")
	c := goredis.NewClient(&goredis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, &Options{Pipelines: 1})
	t.Cleanup(func() { _ = s.Close() })
	call := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := s.RunScript(ctx, algorithm.GCRA{}.Script(), store.Key{Namespace: "x", Identity: "y"}, store.ScriptArgs{N: 1, Limit: 1, Window: 1e6, Burst: 1, Interval: 1e6})
		return err
	}
	var wg sync.WaitGroup
	var first error
	wg.Go(func() { first = call(2 * time.Second) })
	waitFor(t, "the first call to take the lane", func() bool {
		lanes, _ := s.single.b.Busy()
		return lanes == 1
	})
	const queued = 8
	errs := make([]error, queued)
	for i := range queued {
		wg.Go(func() { errs[i] = call(time.Duration(50+20*i) * time.Millisecond) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("queued call %d: %v; want its deadline, matching core.ErrUnavailable and not core.ErrOutcomeUnknown", i, err)
		}
	}
	if !errors.Is(first, core.ErrUnavailable) || !errors.Is(first, core.ErrOutcomeUnknown) {
		t.Errorf("the call on the lane: %v; want core.ErrUnavailable and core.ErrOutcomeUnknown", first)
	}
	if lanes, queued := s.single.b.Busy(); lanes != 0 || queued != 0 {
		t.Errorf("after every call returned: %d lanes busy, %d calls queued", lanes, queued)
	}
}

// gateHook holds each script sent alone until n of them are in flight at
// once, or until its patience runs out, and counts what it saw.
type gateHook struct {
	sendCounter
	n        int
	patience time.Duration
	inFlight chan struct{}
	open     chan struct{}
	once     sync.Once
}

func newGateHook(n int, patience time.Duration) *gateHook {
	return &gateHook{n: n, patience: patience, inFlight: make(chan struct{}, n), open: make(chan struct{})}
}

func (h *gateHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	count := h.sendCounter.ProcessHook(next)
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if isScript(cmd) {
			select {
			case h.inFlight <- struct{}{}:
			default:
			}
			if len(h.inFlight) == h.n {
				h.once.Do(func() { close(h.open) })
			}
			select {
			case <-h.open:
			case <-time.After(h.patience):
			}
		}
		return count(ctx, cmd)
	}
}

// TestBatcherLanesFollowCores: by default as many callers as twice
// GOMAXPROCS each have a round trip of their own, all in flight at once,
// as with a pooled client: none waits behind another's round trip.
func TestBatcherLanesFollowCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	callers := DefaultPipelines()
	if callers != 4 {
		t.Fatalf("DefaultPipelines at GOMAXPROCS 2 = %d, want 4", callers)
	}
	s := newStore(t, nil)
	h := newGateHook(callers, 2*time.Second)
	s.Client().AddHook(h)
	sc := algorithm.GCRA{}.Script()
	if err := s.Client().ScriptLoad(ctxT(t), sc.Source).Err(); err != nil {
		t.Fatal(err)
	}
	key := testKey(t, s.Client())
	p := core.Policy{Name: "t", Limit: 1000, Window: time.Hour}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if _, err := s.RunScript(ctxT(t), sc, key, core.NewScriptArgs(&p, 0, 1)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	select {
	case <-h.open:
	default:
		t.Errorf("%d concurrent callers were never all in flight at once", callers)
	}
	if alone, pipelined, _ := h.sent(); alone != callers || pipelined != 0 {
		t.Errorf("%d concurrent callers: %d sent alone, %d in pipelines; want all alone", callers, alone, pipelined)
	}
}

// TestBatcherLanesCappedByPool: the batcher keeps no more round trips in
// flight than the client has connections, whatever Options.Pipelines says.
func TestBatcherLanesCappedByPool(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t), PoolSize: 3})
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, &Options{Pipelines: 16})
	t.Cleanup(func() { _ = s.Close() })
	if n := s.single.b.Lanes(); n != 3 {
		t.Fatalf("%d lanes over a pool of 3 connections, want 3", n)
	}
}
