package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// lossyStore runs every update on a mapStore, but loses the reply of the
// first lostTakes acquires (the slot is taken, the caller hears "outcome
// unknown") and fails the first failReleases releases outright.
type lossyStore struct {
	*mapStore
	lostTakes    atomic.Int64
	failReleases atomic.Int64
	releases     atomic.Int64
}

func (s *lossyStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	release := m.(*mutation).op == store.OpRelease
	if release {
		s.releases.Add(1)
		if s.failReleases.Add(-1) >= 0 {
			return store.UnknownOutcome(errors.New("release reply lost"))
		}
	}
	if err := s.mapStore.Update(ctx, key, m); err != nil {
		return err
	}
	if !release && s.lostTakes.Add(-1) >= 0 {
		return store.UnknownOutcome(errors.New("acquire reply lost"))
	}
	return nil
}

// waitOrphans waits until no background release runs, at most within the
// bound Acquire documents (plus a margin for a loaded machine).
func waitOrphans(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(orphanWindow*timeout + 2*time.Second)
	for orphansRunning.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d background releases still run after %s", orphansRunning.Load(), orphanWindow*timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAcquireUnknownOutcomeReleases: an Acquire whose reply was lost took a
// slot; under every failure mode the limiter gives it back, so the limit is
// whole again at once instead of after LeaseTTL.
func TestAcquireUnknownOutcomeReleases(t *testing.T) {
	p := Policy{Name: "jobs", Limit: 1, Window: time.Hour}
	for _, mode := range []FailureMode{FailClosed, FailOpen, FailFallback} {
		t.Run(mode.String(), func(t *testing.T) {
			s := &lossyStore{mapStore: newMapStore()}
			s.lostTakes.Store(1)
			var events sync.Map
			cfg := Config{Policy: p, Algorithm: slots{}, Store: s, Failure: mode, Timeout: 20 * time.Millisecond,
				Observer: func(e Event) { events.Store(e.Op, e) }}
			if mode == FailFallback {
				cfg.Fallback = newTestLimiter(t, Config{Policy: p, Algorithm: slots{}, Store: newMapStore()})
			}
			l := newTestLimiter(t, cfg)
			ctx := context.Background()
			ls, _, err := l.Acquire(ctx, "k")
			if (mode == FailClosed) != errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Acquire error = %v", err)
			}
			if mode != FailClosed {
				defer ls.Release(ctx)
			}
			waitOrphans(t, cfg.Timeout)
			if s.keys() != 1 || len(s.m) == 1 && len(s.m[l.Key("k").String()]) != 0 {
				t.Fatalf("the lost lease is still held: %d bytes", len(s.m[l.Key("k").String()]))
			}
			ls2, d, err := l.Acquire(ctx, "k")
			if err != nil || !d.Allowed {
				t.Fatalf("Acquire after the lost one = %+v, %v; want the slot free again", d, err)
			}
			_ = ls2.Release(ctx)
			if e, ok := events.Load("release"); !ok || e.(Event).Err != nil {
				t.Fatalf("observer heard release event %v, %v; want one with no error", e, ok)
			}
		})
	}
}

// TestAcquireUnknownOutcomeReleaseBounded: a release that keeps failing is
// tried a bounded number of times (five attempts, the last tried again at
// most every half deadline within the window), and the goroutine ends by
// itself.
func TestAcquireUnknownOutcomeReleaseBounded(t *testing.T) {
	s := &lossyStore{mapStore: newMapStore()}
	s.lostTakes.Store(1)
	s.failReleases.Store(1 << 30)
	var last atomic.Value
	l := newTestLimiter(t, Config{Policy: Policy{Name: "jobs", Limit: 1, Window: time.Hour}, Algorithm: slots{}, Store: s,
		Timeout: 10 * time.Millisecond, Observer: func(e Event) {
			if e.Op == "release" {
				last.Store(e)
			}
		}})
	start := time.Now()
	if _, _, err := l.Acquire(context.Background(), "k"); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Acquire error = %v, want ErrOutcomeUnknown", err)
	}
	waitOrphans(t, 10*time.Millisecond)
	if got, most := s.releases.Load(), int64(orphanAttempts-1+2*orphanWindow); got < orphanAttempts || got > most {
		t.Fatalf("%d release attempts, want %d to %d", got, orphanAttempts, most)
	}
	if el := time.Since(start); el > orphanWindow*10*time.Millisecond+time.Second {
		t.Fatalf("background release ran for %s", el)
	}
	e, _ := last.Load().(Event)
	if !errors.Is(e.Err, ErrUnavailable) {
		t.Fatalf("observer heard %+v; want the last attempt's error", e)
	}
}

// TestAcquireKnownFailureReleasesNothing: an error that proves nothing ran
// sends no release.
func TestAcquireKnownFailureReleasesNothing(t *testing.T) {
	s := newMapStore()
	s.err = &store.Error{Op: "update", Err: errors.New("connection refused")}
	l := newTestLimiter(t, Config{Policy: Policy{Name: "jobs", Limit: 1, Window: time.Hour}, Algorithm: slots{}, Store: s})
	if _, _, err := l.Acquire(context.Background(), "k"); err == nil {
		t.Fatal("Acquire succeeded on a failing store")
	}
	waitOrphans(t, DefaultTimeout)
	if s.updates != 1 {
		t.Fatalf("%d store calls, want 1 (no release)", s.updates)
	}
}

// stallingStore loses the reply of every acquire, and holds every release
// that arrives before stallEnd until then, or until its context ends
// first, in which case the release never ran: as a client does that waits
// for a connection's handshake with a stalled server before it writes.
type stallingStore struct {
	*mapStore
	stallEnd time.Time
	// refuse: before stallEnd a release fails at once, as a dial to a
	// server that is down does, instead of waiting.
	refuse bool
	// sticky: a release begun before stallEnd fails at its deadline even
	// when the stall ends first, as a client busy with its own retries
	// of a refused dial does.
	sticky bool
}

func (s *stallingStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if m.(*mutation).op != store.OpRelease {
		if err := s.mapStore.Update(ctx, key, m); err != nil {
			return err
		}
		return store.UnknownOutcome(errors.New("acquire reply lost"))
	}
	if wait := time.Until(s.stallEnd); wait > 0 {
		if s.sticky {
			<-ctx.Done()
			return &store.Error{Op: "update", Err: ctx.Err()}
		}
		if s.refuse {
			return &store.Error{Op: "update", Err: errors.New("dial tcp: connection refused")}
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return &store.Error{Op: "update", Err: ctx.Err()}
		case <-t.C:
		}
	}
	return s.mapStore.Update(ctx, key, m)
}

// TestOrphanReleaseOutlastsAStallWithinTheWindow: a store that answers again
// within the background release's window (orphanWindow deadlines after
// Acquire returned) gets the release, whenever the jittered attempts fall:
// the last attempt waits until the window's end, and is tried again until
// then when the store refuses it at once (a server down refuses the dial).
func TestOrphanReleaseOutlastsAStallWithinTheWindow(t *testing.T) {
	const timeout = 10 * time.Millisecond
	for _, mode := range []string{"silent", "refusing", "sticky"} {
		// The stall ends 20 of the window's 21 deadlines after Acquire
		// returns, or 0.3 of a deadline before the window's end.
		for _, stall := range []time.Duration{(orphanWindow - 1) * timeout, orphanWindow*timeout - 3*timeout/10} {
			t.Run(fmt.Sprintf("%s/stall=%v", mode, stall), func(t *testing.T) { orphanOutlastsAStall(t, mode, timeout, stall) })
		}
	}
}

func orphanOutlastsAStall(t *testing.T, mode string, timeout, stall time.Duration) {
	s := &stallingStore{mapStore: newMapStore(), refuse: mode == "refusing", sticky: mode == "sticky"}
	s.stallEnd = time.Now().Add(stall)
	l := newTestLimiter(t, Config{Policy: Policy{Name: "jobs", Limit: 1, Window: time.Hour}, Algorithm: slots{}, Store: s, Timeout: timeout})
	// Three leases, whose releases each draw their own jitter.
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := l.Acquire(context.Background(), id); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("Acquire(%s) error = %v, want ErrOutcomeUnknown", id, err)
		}
	}
	waitOrphans(t, timeout)
	for _, id := range []string{"a", "b", "c"} {
		if b := s.m[l.Key(id).String()]; len(b) != 0 {
			t.Errorf("the lost lease of %s is still held after the stall ended within the window", id)
		}
	}
}

// A try of the last attempt waits for the window's end and at least a
// deadline, but never past a deadline after the window's end, so that the
// goroutine ends by then, as Acquire's doc says.
func TestOrphanDeadlineBound(t *testing.T) {
	end := time.Unix(1000, 0)
	const wait = 100 * time.Millisecond
	for _, tc := range []struct {
		began, want time.Duration // from end
	}{
		{-time.Second, 0},     // the window's end
		{-wait / 2, wait / 2}, // a deadline after it began
		{-time.Millisecond, wait - time.Millisecond},
		{wait / 2, wait}, // never past a deadline after the end
		{2 * wait, wait},
	} {
		if got := orphanDeadline(end.Add(tc.began), end, wait).Sub(end); got != tc.want {
			t.Errorf("a try begun %v from the window's end: deadline %v from it, want %v", tc.began, got, tc.want)
		}
	}
}

// lateStore loses the reply of the first acquire and holds the acquire
// itself back for delay, as a network can deliver a connection's bytes
// after those of another: a release sent on a fresh connection then finds
// nothing, and the acquire lands after it.
type lateStore struct {
	*mapStore
	delay  time.Duration
	held   atomic.Bool
	landed chan struct{}
}

func (s *lateStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	mu := m.(*mutation)
	if mu.op != store.OpRelease && s.held.CompareAndSwap(false, true) {
		late := *mu // the pooled mutation is reused once Update returns
		time.AfterFunc(s.delay, func() {
			s.mapStore.Update(context.Background(), key, &late)
			close(s.landed)
		})
		return store.UnknownOutcome(errors.New("acquire reply lost"))
	}
	return s.mapStore.Update(ctx, key, m)
}

// TestOrphanReleaseOutlastsALateAcquire: a release that finds no lease does
// not end the background release, since the acquire may still be on its
// way; the slot is free again within the documented window, not after
// LeaseTTL.
func TestOrphanReleaseOutlastsALateAcquire(t *testing.T) {
	const timeout = 20 * time.Millisecond
	s := &lateStore{mapStore: newMapStore(), delay: 3 * timeout, landed: make(chan struct{})}
	l := newTestLimiter(t, Config{Policy: Policy{Name: "jobs", Limit: 1, Window: time.Hour}, Algorithm: slots{}, Store: s, Timeout: timeout})
	ctx := context.Background()
	if _, _, err := l.Acquire(ctx, "k"); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Acquire: %v; want an unknown outcome", err)
	}
	waitOrphans(t, timeout)
	<-s.landed
	ls, d, err := l.Acquire(ctx, "k")
	if err != nil || !d.Allowed {
		t.Fatalf("after the background release: %+v, %v; want the slot free again", d, err)
	}
	ls.Release(ctx)
}

// TestFailedReleaseIsRetried: a Release that fails (a slow store, its reply
// lost at the deadline) is tried again in the background as an orphaned
// lease is, so that the slot is free once the store answers, not after
// LeaseTTL; the caller still hears the failure.
func TestFailedReleaseIsRetried(t *testing.T) {
	const timeout = 20 * time.Millisecond
	s := &lossyStore{mapStore: newMapStore()}
	s.failReleases.Store(1)
	l := newTestLimiter(t, Config{Policy: Policy{Name: "jobs", Limit: 1, Window: time.Hour}, Algorithm: slots{}, Store: s, Timeout: timeout})
	ctx := context.Background()
	ls, d, err := l.Acquire(ctx, "k")
	if err != nil || !d.Allowed {
		t.Fatalf("Acquire: %+v, %v", d, err)
	}
	if err := ls.Release(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Release: %v; want the store's failure", err)
	}
	waitOrphans(t, timeout)
	ls, d, err = l.Acquire(ctx, "k")
	if err != nil || !d.Allowed {
		t.Fatalf("after a failed Release: %+v, %v; want the slot free again within the window", d, err)
	}
	ls.Release(ctx)
}

// The background release's event says how long its last store call took,
// as Event.Duration does for every event, not how long the attempts took
// together: a store that refuses at once for many deadlines, then takes
// the release, is a quick call, not a call of the whole stall.
func TestOrphanReleaseEventTimesItsLastCall(t *testing.T) {
	const timeout = 10 * time.Millisecond
	s := &stallingStore{mapStore: newMapStore(), refuse: true}
	s.stallEnd = time.Now().Add(8 * timeout)
	var rec events
	l := newTestLimiter(t, Config{Policy: Policy{Name: "jobs", Limit: 1, Window: time.Hour}, Algorithm: slots{}, Store: s, Timeout: timeout, Observer: rec.observe})
	start := time.Now()
	if _, _, err := l.Acquire(context.Background(), "a"); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Acquire error = %v, want ErrOutcomeUnknown", err)
	}
	waitOrphans(t, timeout)
	took := time.Since(start)
	var release *Event
	for _, e := range rec.all() {
		if e.Op == "release" {
			release = &e
		}
	}
	switch {
	case release == nil:
		t.Fatal("no release event")
	case release.Err != nil:
		t.Fatalf("release event: %v; want the lease released", release.Err)
	case release.Duration >= took/2:
		// The last call is answered at once; the attempts took some ten
		// deadlines (a bound with room for a loaded machine).
		t.Fatalf("release event Duration %v, after attempts that took %v; want its last call's, answered at once", release.Duration, took)
	}
}
