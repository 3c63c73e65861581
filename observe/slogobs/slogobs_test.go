package slogobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// lines is a JSON slog sink whose lines a test reads back.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.Write(p) }

func (l *lines) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var rs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

func (l *lines) msgs(t *testing.T) []string {
	var ms []string
	for _, r := range l.records(t) {
		ms = append(ms, fmt.Sprint(r["level"], " ", r["msg"]))
	}
	return ms
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newLogger(t *testing.T) (*Logger, *lines, *clock) {
	out := &lines{}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	return New(slog.New(slog.NewJSONHandler(out, nil)), Options{Repeat: time.Minute, Now: c.now}), out, c
}

// switchable is a network store that fails while down is set.
type switchable struct {
	mu   sync.Mutex
	down bool
	m    map[string][]byte
}

func (s *switchable) set(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

func (s *switchable) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return store.UnknownOutcome(errors.New("connection reset"))
	}
	k := key.String()
	if next, _ := m.Apply(s.m[k]); next != nil { // nil: unchanged
		s.m[k] = next
	}
	return nil
}

// A store that fails for 500 requests logs three lines, not 500: failing,
// still failing (once per Repeat, with the count), recovered.
func TestStoreFailureLoggedOncePerChange(t *testing.T) {
	lg, out, c := newLogger(t)
	s := &switchable{m: map[string][]byte{}}
	l, err := core.New(core.Config{Policy: core.Policy{Name: "api", Limit: 1_000_000, Window: time.Hour},
		Algorithm: algorithm.FixedWindow{}, Store: s, Failure: core.FailOpen, Observer: lg.Observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 10 {
		l.Allow(ctx, "k")
	}
	if rs := out.records(t); len(rs) != 0 {
		t.Fatalf("a healthy store logged %v", rs)
	}
	s.set(true)
	for i := range 500 {
		if i == 250 {
			c.advance(61 * time.Second)
		}
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Degraded {
			t.Fatalf("fail open: %+v, %v", d, err)
		}
	}
	c.advance(30 * time.Second)
	s.set(false)
	for range 10 {
		l.Allow(ctx, "k")
	}
	got := out.msgs(t)
	want := []string{"WARN sluice: store failing", "WARN sluice: store still failing", "INFO sluice: store recovered"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q; want %q", got, want)
	}
	rs := out.records(t)
	if rs[0]["policy"] != "api" || !strings.Contains(fmt.Sprint(rs[0]["err"]), "connection reset") || rs[0]["degraded"] != true {
		t.Errorf("first line %v", rs[0])
	}
	if rs[1]["errors"] != float64(250) {
		t.Errorf("still failing: errors %v; want 250 (the 2nd to the 251st)", rs[1]["errors"])
	}
	if rs[2]["errors"] != float64(249) {
		t.Errorf("recovered: errors %v; want the 249 since the last line", rs[2]["errors"])
	}
}

// A store that fails one request in two (a cluster with a node down) is
// failing until it has gone Quiet without an error: two lines, not one per
// request.
func TestPartialFailureIsOneFailure(t *testing.T) {
	lg, out, c := newLogger(t)
	for i := range 1000 {
		var err error
		if i%2 == 0 {
			err = store.UnknownOutcome(errors.New("node down"))
		}
		lg.Observe(core.Event{Policy: "api", Op: "allow", Err: err, Decision: core.Decision{Allowed: true, Degraded: err != nil}})
		c.advance(10 * time.Millisecond)
	}
	if got := out.msgs(t); len(got) != 1 || got[0] != "WARN sluice: store failing" {
		t.Fatalf("a store failing half its requests for 10 s logged %q; want one failing line", got)
	}
	c.advance(DefaultQuiet)
	lg.Observe(core.Event{Policy: "api", Op: "allow", Decision: core.Decision{Allowed: true}})
	want := []string{"WARN sluice: store failing", "INFO sluice: store recovered"}
	if got := out.msgs(t); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q; want %q", got, want)
	}
	lg.DenyCacheHit("api")
	if got := out.msgs(t); len(got) != 2 {
		t.Fatalf("DenyCacheHit logged: %q", got[2:])
	}
}

// A caller whose context ended is not a store failure.
func TestCallerGoneIsNotLogged(t *testing.T) {
	lg, out, _ := newLogger(t)
	lg.Observe(core.Event{Policy: "api", Op: "allow", Err: context.Canceled})
	lg.Observe(core.Event{Policy: "api", Op: "allow", Err: fmt.Errorf("wrapped: %w", context.DeadlineExceeded)})
	if rs := out.records(t); len(rs) != 0 {
		t.Fatalf("logged %v", rs)
	}
	// The limiter's own deadline is a store failure (it matches ErrUnavailable).
	lg.Observe(core.Event{Policy: "api", Op: "allow", Err: &store.Error{Op: "update", Err: context.DeadlineExceeded}})
	if got := out.msgs(t); len(got) != 1 || got[0] != "WARN sluice: store failing" {
		t.Fatalf("lines %q", got)
	}
}

func TestBreakerAndFallbackOncePerChange(t *testing.T) {
	lg, out, c := newLogger(t)
	for _, s := range []string{"closed", "closed", "open", "open", "open", "half-open", "closed", "closed"} {
		lg.BreakerStateChanged("redis", s)
	}
	lg.SetFallbackActive("api", false) // not active: no change
	lg.SetFallbackActive("api", true)
	lg.SetFallbackActive("api", true)
	c.advance(90 * time.Second)
	lg.SetFallbackActive("api", false)
	lg.SetFallbackActive("api", false)
	want := []string{
		"INFO sluice: breaker state", "WARN sluice: breaker state", "INFO sluice: breaker state", "INFO sluice: breaker state",
		"WARN sluice: fallback entered", "INFO sluice: fallback left",
	}
	if got := out.msgs(t); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q; want %q", got, want)
	}
	rs := out.records(t)
	if rs[1]["state"] != "open" || rs[1]["from"] != "closed" || rs[0]["from"] != "unknown" {
		t.Errorf("breaker lines %v, %v", rs[0], rs[1])
	}
	if rs[5]["for"] != float64(90*time.Second) {
		t.Errorf("fallback left after %v; want 90s", rs[5]["for"])
	}
}

func TestEvictionWarningOnce(t *testing.T) {
	lg, out, _ := newLogger(t)
	w := &core.EvictionWarning{Addr: "127.0.0.1:6379", Policy: "allkeys-lru"}
	for range 3 { // the stores repeat their check every minute
		lg.Warning(w)
	}
	lg.Warning(&core.EvictionWarning{Addr: "127.0.0.1:6380", Policy: "volatile-lru"})
	lg.Warning(nil)
	rs := out.records(t)
	if len(rs) != 2 || rs[0]["msg"] != "sluice: eviction warning" || rs[0]["evictable"] != true {
		t.Fatalf("lines %v; want one per server", rs)
	}
}

// Concurrent failures still log one "store failing" line.
func TestConcurrentFailureOneLine(t *testing.T) {
	lg, out, _ := newLogger(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				lg.Observe(core.Event{Policy: "api", Op: "allow", Err: store.UnknownOutcome(errors.New("x"))})
			}
		}()
	}
	wg.Wait()
	if got := out.msgs(t); len(got) != 1 {
		t.Fatalf("lines %q; want one", got)
	}
}

func BenchmarkObserveHealthy(b *testing.B) {
	lg := New(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), Options{})
	lg.Observe(core.Event{Policy: "api", Err: store.UnknownOutcome(errors.New("x"))})
	lg.Observe(core.Event{Policy: "api"})
	e := core.Event{Policy: "api", Op: "allow", Decision: core.Decision{Allowed: true}}
	b.ReportAllocs()
	for b.Loop() {
		lg.Observe(e)
	}
}

// A refusal by the pre-filter or the deny cache made no store call, so it
// says nothing of the store's health: during an outage it must not log a
// recovery (and the next failure a new "failing" line), once per request.
func TestInProcessRefusalsAreNotARecovery(t *testing.T) {
	lg, out, _ := newLogger(t)
	s := &switchable{m: map[string][]byte{}}
	pre, err := core.New(core.Config{Policy: core.Policy{Name: "pre", Limit: 1, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: &switchable{m: map[string][]byte{}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := core.New(core.Config{Policy: core.Policy{Name: "api", Limit: 1_000, Window: time.Hour},
		Algorithm: algorithm.FixedWindow{}, Store: s, Failure: core.FailOpen, PreFilter: pre, Observer: lg.Observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Allow(ctx, "flood") // spends the pre-filter's one unit while the store is up
	s.set(true)
	for i := range 10 {
		if d, err := l.Allow(ctx, "flood"); err != nil || d.Allowed {
			t.Fatalf("flood: %+v, %v; want a refusal by the pre-filter", d, err)
		}
		if d, err := l.Allow(ctx, fmt.Sprint("other", i)); err != nil || !d.Degraded {
			t.Fatalf("other: %+v, %v; want fail open", d, err)
		}
	}
	if got := out.msgs(t); strings.Join(got, "|") != "WARN sluice: store failing" {
		t.Fatalf("lines %q; want one \"store failing\"", got)
	}
}

// More failing policies than MaxNames must not make a line per request:
// an outage fails every policy at once. The policies beyond the bound are
// logged together, under Other, once per change; a tracked policy that
// has recovered makes room for another.
func TestManyFailingPoliciesStayBounded(t *testing.T) {
	lg, out, c := newLogger(t)
	boom := &store.Error{Op: "update", Err: errors.New("connection refused")}
	fail := func(p string) { lg.Observe(core.Event{Policy: p, Op: "allow", Err: boom}) }
	ok := func(p string) { lg.Observe(core.Event{Policy: p, Op: "allow"}) }
	const n = MaxNames + 100
	for range 5 { // round after round of requests, inside one Repeat
		for i := range n {
			fail(fmt.Sprint("p", i))
		}
	}
	count := func(msg, policy string) (k int) {
		for _, r := range out.records(t) {
			if r["msg"] == msg && (policy == "" || r["policy"] == policy) {
				k++
			}
		}
		return k
	}
	if k := count("sluice: store failing", ""); k != MaxNames+1 {
		t.Fatalf("%d 'store failing' lines for %d policies failing 5 times each; want %d (one each for %d, one for the rest)", k, n, MaxNames+1, MaxNames)
	}
	if k := count("sluice: store failing", Other); k != 1 {
		t.Fatalf("%d lines for the policies beyond the bound; want 1", k)
	}

	// Every policy recovers: one line each for the tracked ones, one for
	// the rest together.
	c.advance(DefaultQuiet)
	for i := range n {
		ok(fmt.Sprint("p", i))
	}
	if k := count("sluice: store recovered", ""); k != MaxNames+1 {
		t.Fatalf("%d 'store recovered' lines; want %d", k, MaxNames+1)
	}
	// The recovered make room: a policy never seen before is tracked on
	// its own.
	fail("fresh")
	if k := count("sluice: store failing", "fresh"); k != 1 {
		t.Fatalf("a new policy failing after the others recovered: %d lines of its own; want 1", k)
	}
}

// Failures and recoveries of more policies than MaxNames from several
// goroutines keep the tracking consistent: at most MaxNames tracked, and
// the count of failing ones is the count of those whose failing is set.
func TestManyPoliciesConcurrently(t *testing.T) {
	lg, _, c := newLogger(t)
	boom := &store.Error{Op: "update", Err: errors.New("connection refused")}
	for phase := range 6 {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 1500 {
					e := core.Event{Policy: fmt.Sprint("p", (i*7+g*131)%1500), Op: "allow"}
					if phase%2 == 0 {
						e.Err = boom
					}
					lg.Observe(e)
				}
			}()
		}
		wg.Wait()
		c.advance(DefaultQuiet)
	}
	tracked, failing := 0, 0
	lg.policies.Range(func(_, v any) bool {
		tracked++
		if v.(*policy).failing.Load() {
			failing++
		}
		return true
	})
	if tracked > MaxNames || tracked != lg.npol || int64(failing) != lg.failing.Load() {
		t.Fatalf("%d tracked (npol %d, at most %d), %d failing (count %d)", tracked, lg.npol, MaxNames, failing, lg.failing.Load())
	}
}

// A decision that failed before any store was asked (a tier resolver's
// error, which Multi.ObserveFailure reports) is logged as the decisions'
// failure, not the store's: an operator is sent to the right system.
func TestFailureThatIsNotTheStores(t *testing.T) {
	lg, out, c := newLogger(t)
	m, err := core.NewMulti(core.MultiConfig{Name: "tiers", Store: &switchable{m: map[string][]byte{}}, Observer: lg.Observe})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := core.NewLimits(core.Limit{Policy: core.Policy{Name: "day", Limit: 100, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.ObserveFailure(errors.New("billing service down"))
	}
	c.advance(time.Minute)
	if _, _, err := m.Allow(context.Background(), "k", limits, nil); err != nil {
		t.Fatal(err)
	}
	got := out.msgs(t)
	want := []string{"WARN sluice: decisions failing", "INFO sluice: decisions recovered"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q; want %q", got, want)
	}
	if rs := out.records(t); !strings.Contains(fmt.Sprint(rs[0]["err"]), "billing service down") {
		t.Errorf("first line %v; want the resolver's error", rs[0])
	}
}
