package core

import (
	"context"
	"testing"
	"time"
)

// An observed decision of an in-process store stays on the Binder's fast
// path (Take, not Update) and is not timed: its Duration is zero.
func TestObservedBinderPathStaysFast(t *testing.T) {
	var rec events
	s := &bindStore{mapStore: newMapStore()}
	l := newTestLimiter(t, Config{Store: s, Observer: rec.observe})
	for i := range 6 {
		if d, err := l.Allow(context.Background(), "k"); err != nil || d.Allowed != (i < 5) {
			t.Fatalf("call %d: %+v, %v", i, d, err)
		}
	}
	if s.takes != 6 {
		t.Fatalf("%d takes; want every Allow through Take", s.takes)
	}
	es := rec.all()
	if len(es) != 6 {
		t.Fatalf("observer heard %d events; want 6", len(es))
	}
	for i, e := range es {
		if e.Duration != 0 || e.Op != "allow" || e.Policy != "api" || e.Decision.Allowed != (i < 5) {
			t.Fatalf("event %d: %+v; want an untimed allow", i, e)
		}
	}
}

// A Release is a store call, timed like the Acquire before it.
func TestObservedReleaseIsTimed(t *testing.T) {
	var rec events
	s := newMapStore()
	s.delay = 2 * time.Millisecond
	l := newTestLimiter(t, Config{Store: s, Algorithm: slots{}, Observer: rec.observe})
	ls, _, err := l.Acquire(context.Background(), "k")
	if err != nil || ls == nil {
		t.Fatalf("Acquire: %v, %v", ls, err)
	}
	if err := ls.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	es := rec.all()
	if len(es) != 2 || es[1].Op != "release" || es[1].Duration < s.delay {
		t.Fatalf("events %+v; want a release that took at least %v", es, s.delay)
	}
}
