package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// events records what an Observer hears.
type events struct {
	mu sync.Mutex
	es []Event
}

func (r *events) observe(e Event) { r.mu.Lock(); r.es = append(r.es, e); r.mu.Unlock() }

func (r *events) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.es...)
}

// A shadow limiter decides and reports but never refuses: what it would
// have refused is returned admitted, with nothing that tells a client
// (no RetryAfter, no Delay), and the Observer hears Shadowed.
func TestShadowAllow(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func() store.Store{
		"update": func() store.Store { return newMapStore() },
		"binder": func() store.Store { return &bindStore{mapStore: newMapStore()} },
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			for _, observed := range []bool{false, true} {
				var rec events
				cfg := Config{Store: mk(), Shadow: true}
				if observed {
					cfg.Observer = rec.observe
				}
				l := newTestLimiter(t, cfg)
				for i := range 7 {
					d, err := l.Allow(ctx, "k")
					if err != nil || !d.Allowed || d.RetryAfter != 0 || d.Delay != 0 || d.Degraded {
						t.Fatalf("observed %v, call %d: %+v, %v; want an admission", observed, i, d, err)
					}
					if want := max(int64(4-i), 0); d.Remaining != want || d.Limit != 5 {
						t.Fatalf("observed %v, call %d: Remaining %d Limit %d; want %d, 5", observed, i, d.Remaining, d.Limit, want)
					}
				}
				if !observed {
					continue
				}
				es := rec.all()
				if len(es) != 7 {
					t.Fatalf("observer heard %d events; want 7", len(es))
				}
				for i, e := range es {
					if e.Shadowed != (i >= 5) || !e.Decision.Allowed {
						t.Fatalf("event %d: %+v; want Shadowed from the 6th on", i, e)
					}
				}
			}
		})
	}
}

// Without Shadow, the same limiter refuses, and no event is Shadowed.
func TestShadowOffRefuses(t *testing.T) {
	var rec events
	l := newTestLimiter(t, Config{Store: &bindStore{mapStore: newMapStore()}, Observer: rec.observe})
	for i := range 6 {
		d, _ := l.Allow(context.Background(), "k")
		if d.Allowed != (i < 5) {
			t.Fatalf("call %d: %+v", i, d)
		}
	}
	for _, e := range rec.all() {
		if e.Shadowed {
			t.Fatalf("a limiter without Shadow reported %+v", e)
		}
	}
}

// A fallback's refusal is shadowed too, and so is a store error that the
// failure policy would return.
func TestShadowFailure(t *testing.T) {
	ctx := context.Background()
	boom := &store.Error{Op: "update", Err: errors.New("down")}
	fb := newTestLimiter(t, Config{Store: newMapStore(), Policy: Policy{Name: "fb", Limit: 1, Window: time.Second}})
	var rec events
	l := newTestLimiter(t, Config{Store: &mapStore{err: boom}, Failure: FailFallback, Fallback: fb, Shadow: true, Observer: rec.observe})
	for i := range 2 {
		d, err := l.Allow(ctx, "k")
		if err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("call %d: %+v, %v; want a degraded admission", i, d, err)
		}
	}
	if es := rec.all(); len(es) != 2 || es[0].Shadowed || !es[1].Shadowed || !errors.Is(es[1].Err, boom) {
		t.Fatalf("events %+v; want the second shadowed, with the store's error", es)
	}
	// A shadow limit never refuses, nor makes its store a dependency of
	// the requests it watches: a store error under fail closed, and a
	// fallback that fails too, admit, degraded, and the Observer hears the
	// store's error.
	for _, cfg := range []Config{
		{Store: &mapStore{err: boom}, Shadow: true},
		{Store: &mapStore{err: boom}, Shadow: true, Failure: FailFallback, Fallback: newTestLimiter(t, Config{Store: &mapStore{err: boom}})},
		{Store: &mapStore{err: boom}, Shadow: true, Algorithm: slots{}, Policy: Policy{Name: "c", Limit: 1, Window: time.Second}},
	} {
		var rec events
		cfg.Observer = rec.observe
		l = newTestLimiter(t, cfg)
		var d Decision
		var err error
		if _, ok := cfg.Algorithm.(slots); ok {
			var ls *Lease
			ls, d, err = l.Acquire(ctx, "k")
			if err == nil && (ls == nil || ls.Release(ctx) != nil) {
				t.Fatalf("shadow Acquire on a failed store: lease %v; want one whose Release does nothing", ls)
			}
		} else {
			d, err = l.Allow(ctx, "k")
		}
		if err != nil || !d.Allowed || !d.Degraded {
			t.Fatalf("failure %v in shadow mode: %+v, %v; want a degraded admission", cfg.Failure, d, err)
		}
		if es := rec.all(); len(es) == 0 || !errors.Is(es[0].Err, boom) {
			t.Fatalf("failure %v in shadow mode: events %+v; want the store's error heard", cfg.Failure, es)
		}
	}
	// An input error is still an error.
	l = newTestLimiter(t, Config{Store: &mapStore{err: boom}, Shadow: true})
	if _, err := l.AllowN(ctx, "", 1); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("an empty identity in shadow mode: %v; want ErrInvalidInput", err)
	}
}

// A shadow concurrency limiter hands out a lease for a slot it would have
// refused; releasing it changes nothing in the store.
func TestShadowAcquire(t *testing.T) {
	ctx := context.Background()
	s := newMapStore()
	var rec events
	l := newTestLimiter(t, Config{Store: s, Algorithm: slots{}, Policy: Policy{Name: "c", Limit: 1, Window: time.Second}, Shadow: true, Observer: rec.observe})
	held, d, err := l.Acquire(ctx, "k")
	if err != nil || !d.Allowed || held == nil {
		t.Fatalf("first Acquire: %v %+v %v", held, d, err)
	}
	ls, d, err := l.Acquire(ctx, "k")
	if err != nil || !d.Allowed || ls == nil || d.RetryAfter != 0 || d.Remaining != 0 {
		t.Fatalf("second Acquire: %v %+v %v; want a shadow admission", ls, d, err)
	}
	before := s.updates
	if err := ls.Release(ctx); err != nil || s.updates != before {
		t.Fatalf("shadow Release: %v, %d store updates; want none", err, s.updates-before)
	}
	if err := ls.Release(ctx); !errors.Is(err, ErrLeaseReleased) {
		t.Fatalf("second Release: %v; want ErrLeaseReleased", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	es := rec.all()
	if len(es) < 2 || es[0].Shadowed || !es[1].Shadowed || es[1].Op != "acquire" {
		t.Fatalf("events %+v; want the second acquire shadowed", es)
	}
}
