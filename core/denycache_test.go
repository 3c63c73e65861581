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
	if d, _ := l.AllowN(ctx, "a", 3); d.Allowed || s.updates != calls+1 {
		t.Fatalf("cost 3 after a refused cost 2: %+v, %d store calls; want refused by the cache", d, s.updates-calls-1)
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
