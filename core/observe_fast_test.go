package core

import (
	"context"
	"testing"
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
