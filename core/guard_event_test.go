package core

import (
	"context"
	"testing"
	"time"
)

// An Observer can tell a refusal decided in process (by the deny cache or
// the pre-filter) from one the store made: metrics count deny-cache hits
// from it.
func TestGuardedRefusalsSayWhoDecided(t *testing.T) {
	clock := NewManualClock(time.Unix(1_000_000, 0))
	var events []Event
	observe := func(e Event) { events = append(events, e) }
	l, err := New(Config{Policy: PerSecond("api", 1), Algorithm: window{}, Store: newMapStore(), Clock: clock,
		DenyCache: &DenyCacheOptions{}, Observer: observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := l.Allow(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if len(events) != 3 || events[0].DenyCached || events[1].DenyCached || !events[2].DenyCached || events[2].Decision.Allowed {
		t.Fatalf("events %+v; want an admission and a store refusal, then a refusal by the deny cache", events)
	}
	// Duration times store calls: a refusal decided in process made none,
	// and a latency histogram fed from it would describe the cache.
	if events[2].Duration != 0 {
		t.Errorf("a deny-cache refusal has Duration %v, want 0: it made no store call", events[2].Duration)
	}

	events = nil
	pre, err := New(Config{Policy: PerSecond("pre", 1), Algorithm: window{}, Store: newMapStore(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	l, err = New(Config{Policy: PerSecond("api", 10), Algorithm: window{}, Store: newMapStore(), Clock: clock,
		PreFilter: pre, Observer: observe})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Allow(ctx, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if len(events) != 2 || events[0].PreFiltered || !events[1].PreFiltered || events[1].DenyCached {
		t.Fatalf("events %+v; want an admission, then a refusal by the pre-filter", events)
	}
	if events[1].Duration != 0 {
		t.Errorf("a pre-filter refusal has Duration %v, want 0: it made no store call", events[1].Duration)
	}
}
