package core

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// window is a fixed window for these tests: Limit per Window, aligned on
// the epoch; a refusal's RetryAfter is the rest of the window.
type window struct{}

func (window) Name() string          { return "window" }
func (window) Quota(p *Policy) int64 { return p.Limit }
func (window) Step(state []byte, now, n int64, p *Policy) ([]byte, time.Duration, Decision) {
	w := p.WindowMicros()
	start := now - now%w
	var used int64
	if len(state) == 16 && int64(binary.BigEndian.Uint64(state)) == start {
		used = int64(binary.BigEndian.Uint64(state[8:]))
	}
	left := start + w - now
	if used+n > p.Limit {
		return nil, 0, Decision{Limit: p.Limit, Remaining: p.Limit - used, RetryAfter: Micros(left), ResetAfter: Micros(left)}
	}
	used += n
	next := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(state[:0], uint64(start)), uint64(used))
	return next, Micros(left), Decision{Allowed: true, Limit: p.Limit, Remaining: p.Limit - used, ResetAfter: Micros(left)}
}

func denyLimiter(t *testing.T, s store.Store, clock Clock, opts *DenyCacheOptions) *Limiter {
	t.Helper()
	l, err := New(Config{Policy: PerSecond("api", 3), Algorithm: window{}, Store: s, Clock: clock, DenyCache: opts})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDenyCacheRefusesWithoutStoreCallUntilRetryAfter(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	l := denyLimiter(t, s, clock, &DenyCacheOptions{})
	ctx := context.Background()
	for i := range 3 {
		if d, err := l.Allow(ctx, "a"); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want admitted", i, d, err)
		}
	}
	clock.Advance(100 * time.Millisecond)
	d, err := l.Allow(ctx, "a")
	if err != nil || d.Allowed || d.RetryAfter != 900*time.Millisecond {
		t.Fatalf("4th request: %+v, %v; want refused, RetryAfter 900ms", d, err)
	}
	calls := s.updates
	for i := range 100 {
		clock.Advance(8 * time.Millisecond) // to 900 ms into the window
		d, err := l.Allow(ctx, "a")
		want := 900*time.Millisecond - time.Duration(i+1)*8*time.Millisecond
		if err != nil || d.Allowed || d.RetryAfter != want || d.Limit != 3 {
			t.Fatalf("flood request %d: %+v, %v; want refused with RetryAfter %v", i, d, err, want)
		}
	}
	if s.updates != calls {
		t.Fatalf("the flood cost %d store calls, want 0", s.updates-calls)
	}
	// Another identity is not refused for "a".
	if d, _ := l.Allow(ctx, "b"); !d.Allowed || s.updates != calls+1 {
		t.Fatalf("identity b: %+v after %d store calls; want admitted by the store", d, s.updates-calls)
	}
	clock.Advance(100 * time.Millisecond) // the window is over
	if d, _ := l.Allow(ctx, "a"); !d.Allowed || s.updates != calls+2 {
		t.Fatalf("after RetryAfter: %+v, %d store calls; want admitted by the store", d, s.updates-calls)
	}
}

func TestDenyCacheHoldsOnlyTheRefusedCostOrMore(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	l := denyLimiter(t, s, clock, &DenyCacheOptions{})
	ctx := context.Background()
	if d, _ := l.AllowN(ctx, "a", 2); !d.Allowed {
		t.Fatal("2 of 3 refused")
	}
	if d, _ := l.AllowN(ctx, "a", 2); d.Allowed {
		t.Fatal("4 of 3 admitted")
	}
	calls := s.updates
	if d, _ := l.AllowN(ctx, "a", 1); !d.Allowed || s.updates != calls+1 {
		t.Fatalf("cost 1 after a refused cost 2: %+v; want the store to admit it", d)
	}
	// A costlier request is refused too, but its wait may be longer than
	// the cheaper one's: the store says it.
	if d, _ := l.AllowN(ctx, "a", 3); d.Allowed || s.updates != calls+2 {
		t.Fatalf("cost 3 after a refused cost 2: %+v, %d store calls; want refused by the store", d, s.updates-calls-1)
	}
}

// A cached refusal carries the store's RetryAfter, counted down, however
// short MaxAge is: MaxAge bounds how long the cache holds it, not the
// wait a client is told.
func TestDenyCacheKeepsTheStoresRetryAfter(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	l, err := New(Config{Policy: Policy{Name: "hour", Limit: 1, Window: time.Hour}, Algorithm: window{}, Store: s, Clock: clock,
		DenyCache: &DenyCacheOptions{MaxAge: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Allow(ctx, "a")
	first, _ := l.Allow(ctx, "a")
	calls := s.updates
	clock.Advance(time.Second)
	d, _ := l.Allow(ctx, "a")
	if s.updates != calls || d.Allowed || d.RetryAfter != first.RetryAfter-time.Second {
		t.Fatalf("a refusal from the cache: %+v after %d store calls; want RetryAfter %v, the store's less the second since", d, s.updates-calls, first.RetryAfter-time.Second)
	}
	clock.Advance(10 * time.Second) // past MaxAge: the store is asked again
	if d, _ := l.Allow(ctx, "a"); s.updates != calls+1 || d.Allowed {
		t.Fatalf("past MaxAge: %+v after %d store calls; want the store's refusal", d, s.updates-calls)
	}
}

// The cache never admits (every admission is the store's), and what it
// refuses, the store would have refused at that moment: checked against
// the algorithm stepped on the store's own state, over random costs,
// identities and clock steps.
func TestDenyCacheRefusesOnlyWhatTheStoreWould(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	l := denyLimiter(t, s, clock, &DenyCacheOptions{Size: 2}) // tiny: identities share slots
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	var cached int
	for i := range 20_000 {
		clock.Advance(time.Duration(r.IntN(40)) * time.Millisecond)
		id := string(rune('a' + r.IntN(4)))
		n := 1 + r.Int64N(3)
		s.mu.Lock()
		state := append([]byte(nil), s.m[l.Key(id).String()]...)
		s.mu.Unlock()
		_, _, want := window{}.Step(state, clock.Now().UnixMicro(), n, &l.p)
		calls := s.updates
		d, err := l.AllowN(ctx, id, n)
		if err != nil {
			t.Fatal(err)
		}
		if s.updates == calls {
			cached++
			if d.Allowed || want.Allowed {
				t.Fatalf("step %d: the cache decided %+v for %s cost %d; the store would decide %+v", i, d, id, n, want)
			}
		}
	}
	if cached == 0 {
		t.Fatal("the cache refused nothing")
	}
}

func TestDenyCacheMaxAgeAndReset(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	l, err := New(Config{Policy: Policy{Name: "api", Limit: 1, Window: time.Hour}, Algorithm: window{}, Store: s, Clock: clock,
		DenyCache: &DenyCacheOptions{MaxAge: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l.Allow(ctx, "a")
	l.Allow(ctx, "a") // refused for the rest of the hour; held for a second
	calls := s.updates
	clock.Advance(999 * time.Millisecond)
	if d, _ := l.Allow(ctx, "a"); d.Allowed || s.updates != calls {
		t.Fatalf("within MaxAge: %+v, %d store calls; want refused by the cache", d, s.updates-calls)
	}
	clock.Advance(time.Millisecond)
	if d, _ := l.Allow(ctx, "a"); d.Allowed || s.updates != calls+1 {
		t.Fatalf("at MaxAge: %+v, %d store calls; want refused by the store", d, s.updates-calls)
	}
	if err := l.Reset(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(ctx, "a"); !d.Allowed {
		t.Fatalf("after Reset: %+v; want admitted", d)
	}
}

func TestDenyCacheKeepsNoDegradedRefusal(t *testing.T) {
	s := newMapStore()
	fbStore := newMapStore()
	fb, err := New(Config{Policy: PerSecond("fb", 1), Algorithm: window{}, Store: fbStore})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Policy: PerSecond("api", 100), Algorithm: window{}, Store: s, Failure: FailFallback, Fallback: fb, DenyCache: &DenyCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.err = &store.Error{Op: "update", Err: errors.New("down")}
	l.Allow(ctx, "a")
	if d, _ := l.Allow(ctx, "a"); d.Allowed || !d.Degraded {
		t.Fatalf("fallback: %+v; want a degraded refusal", d)
	}
	s.err = nil
	if d, _ := l.Allow(ctx, "a"); !d.Allowed || d.Degraded {
		t.Fatalf("store back: %+v; want the store's admission (the fallback's refusal is not cached)", d)
	}
}

func TestDenyCacheSizeIsBounded(t *testing.T) {
	for _, c := range []struct{ size, want int }{{0, DefaultDenyCacheSize}, {-1, DefaultDenyCacheSize}, {5, 8}, {1 << 30, MaxDenyCacheSize}} {
		if got := len(newDenyCache(&DenyCacheOptions{Size: c.size}).slots); got != c.want {
			t.Errorf("Size %d: %d slots, want %d", c.size, got, c.want)
		}
	}
}

func TestPreFilterRefusesFloodsBeforeTheStore(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	pf, err := New(Config{Policy: PerSecond("pre", 6), Algorithm: window{}, Store: newMapStore(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Policy: PerSecond("api", 3), Algorithm: window{}, Store: s, Clock: clock, PreFilter: pf})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var admitted int
	for range 100 {
		if d, _ := l.Allow(ctx, "a"); d.Allowed {
			admitted++
		}
	}
	if admitted != 3 || s.updates != 6 {
		t.Fatalf("flood of 100: %d admitted, %d store calls; want 3 admitted by the store of 6 passed", admitted, s.updates)
	}
	// The store stays the source of truth: what the pre-filter admits, it
	// may still refuse (above: requests 4 to 6).
}

func TestPreFilterOfTwiceTheLimitRefusesNothingAdmissible(t *testing.T) {
	s := newMapStore()
	clock := NewManualClock(time.Unix(1_000_000, 0))
	pf, err := New(Config{Policy: PerSecond("pre", 20), Algorithm: window{}, Store: newMapStore(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{Policy: PerSecond("api", 10), Algorithm: window{}, Store: s, Clock: clock, PreFilter: pf})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A client at twice its limit: each window, the store admits 10 and
	// refuses 10; the pre-filter refuses none of them.
	for i := range 400 {
		clock.Advance(50 * time.Millisecond)
		calls := s.updates
		l.Allow(ctx, "a")
		if s.updates == calls {
			t.Fatalf("request %d at twice the limit was refused by the pre-filter", i)
		}
	}
}

func TestPreFilterMustBeARateLimiter(t *testing.T) {
	pf, err := New(Config{Policy: PerSecond("pre", 1), Algorithm: slots{}, Store: newMapStore()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Policy: PerSecond("api", 1), Algorithm: window{}, Store: newMapStore(), PreFilter: pf}); err == nil {
		t.Fatal("a concurrency pre-filter was accepted")
	}
}

// heldStore holds each Update's return, after it decided, until released:
// a reply on its way while something else happens.
type heldStore struct {
	*mapStore
	decided, release chan struct{}
}

func (h *heldStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	err := h.mapStore.Update(ctx, key, m)
	if h.decided != nil {
		h.decided <- struct{}{}
		<-h.release
	}
	return err
}

// A Reset that comes while a refusal is on its way from the store must
// not leave that refusal cached in front of the fresh key, and it resets
// the pre-filter too: a fresh quota in the store must not meet a spent one
// in process.
func TestResetReachesTheDenyCacheAndThePreFilter(t *testing.T) {
	ctx := context.Background()
	s := &heldStore{mapStore: newMapStore()}
	hour := Policy{Name: "hour", Limit: 1, Window: time.Hour}
	l, err := New(Config{Policy: hour, Algorithm: window{}, Store: s, DenyCache: &DenyCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(ctx, "a"); !d.Allowed {
		t.Fatal("the first request was refused")
	}
	s.decided, s.release = make(chan struct{}), make(chan struct{})
	done := make(chan Decision)
	go func() { d, _ := l.Allow(ctx, "a"); done <- d }()
	<-s.decided // refused by the store, its reply held
	s.decided = nil
	if err := l.Reset(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	close(s.release)
	if d := <-done; d.Allowed {
		t.Fatal("the held request was admitted")
	}
	if d, _ := l.Allow(ctx, "a"); !d.Allowed {
		t.Fatalf("after the Reset: %+v; want the fresh key's admission, not the refusal the Reset overtook", d)
	}

	pre, err := New(Config{Policy: Policy{Name: "pre", Limit: 4, Window: time.Hour}, Algorithm: window{}, Store: newMapStore()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Policy: Policy{Name: "main", Limit: 4, Window: time.Hour}, Algorithm: window{}, Store: newMapStore(), PreFilter: pre})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		m.Allow(ctx, "b")
	}
	if err := m.Reset(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Allow(ctx, "b"); !d.Allowed {
		t.Fatalf("after a Reset: %+v; want admitted, not refused by the pre-filter's spent count", d)
	}
}
