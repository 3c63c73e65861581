package guard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/store"
)

// change is one report of OnStateChange.
type change struct {
	from, to guard.State
	at       time.Time
}

func (c change) String() string { return c.from.String() + "->" + c.to.String() }

// reports returns options whose OnStateChange sends every change to the
// returned channel (buffered: the callback must not block).
func reports(cooldown time.Duration) (*guard.BreakerOptions, chan change) {
	ch := make(chan change, 1024)
	return &guard.BreakerOptions{Cooldown: cooldown, OnStateChange: func(_ string, from, to guard.State) {
		ch <- change{from, to, time.Now()}
	}}, ch
}

func open(t *testing.T, br *guard.Breaker, f *flaky) {
	t.Helper()
	f.set(errDown)
	for range guard.DefaultConsecutiveFailures {
		_ = br.Store().Update(context.Background(), store.Key{Namespace: "n", Identity: "a"}, &step{})
	}
}

func next(t *testing.T, ch chan change, within time.Duration) change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(within):
		t.Fatalf("no state change reported within %v", within)
	}
	return change{}
}

// An open breaker over a service that makes no more calls still turns
// half-open when its Cooldown ends, and says so: an observer's gauge is
// not left at open, though nothing called the breaker (State included),
// and nothing was sent to the store.
func TestBreakerReportsHalfOpenWithoutACall(t *testing.T) {
	const cooldown = 40 * time.Millisecond
	f := newFlaky()
	opts, ch := reports(cooldown)
	br := guard.NewBreaker(f, opts)
	t.Cleanup(br.Stop)
	open(t, br, f)
	opened := next(t, ch, time.Second)
	if opened.String() != "closed->open" {
		t.Fatalf("first change %v, want closed->open", opened)
	}
	calls := f.calls.Load()
	half := next(t, ch, 5*time.Second)
	if half.String() != "open->half-open" {
		t.Fatalf("change %v after Cooldown with no call, want open->half-open", half)
	}
	if d := half.at.Sub(opened.at); d < cooldown {
		t.Fatalf("half-open %v after opening, before the %v Cooldown", d, cooldown)
	}
	if f.calls.Load() != calls {
		t.Fatalf("turning half-open sent %d calls to the store", f.calls.Load()-calls)
	}
	select {
	case c := <-ch:
		t.Fatalf("a quiet half-open breaker reported %v", c)
	case <-time.After(3 * cooldown):
	}
	// Half-open waits for a call to probe, as before: the store, back,
	// closes it after Probes successes.
	f.set(nil)
	for range guard.DefaultProbes {
		if err := br.Store().Update(context.Background(), store.Key{Namespace: "n", Identity: "a"}, &step{}); err != nil {
			t.Fatalf("probe: %v", err)
		}
	}
	if c := next(t, ch, time.Second); c.String() != "half-open->closed" {
		t.Fatalf("change %v after %d good probes, want half-open->closed", c, guard.DefaultProbes)
	}
}

// A probe that fails opens the breaker again, and the timer turns it
// half-open again after another Cooldown: each opening is followed by its
// half-open report, with no call in between.
func TestBreakerReportsHalfOpenAfterEachOpening(t *testing.T) {
	const cooldown = 30 * time.Millisecond
	f := newFlaky()
	opts, ch := reports(cooldown)
	br := guard.NewBreaker(f, opts)
	t.Cleanup(br.Stop)
	open(t, br, f)
	want := []string{"closed->open", "open->half-open"}
	for range 3 {
		if c := next(t, ch, time.Second); c.String() != want[0] {
			t.Fatalf("change %v, want %v", c, want[0])
		}
		if c := next(t, ch, 5*time.Second); c.String() != want[1] {
			t.Fatalf("change %v, want %v", c, want[1])
		}
		// One failed probe.
		if err := br.Store().Update(context.Background(), store.Key{Namespace: "n", Identity: "a"}, &step{}); !errors.Is(err, errDown) {
			t.Fatalf("probe: %v, want the store's error", err)
		}
		want[0] = "half-open->open"
	}
}

// Stop ends the timer: no report comes from it after Stop returns, no
// goroutine is left, and the breaker works on, turning half-open when a
// call or State finds its Cooldown over. Closing the breaker's store stops
// it too.
func TestBreakerStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const cooldown = 20 * time.Millisecond
	for _, how := range []string{"Stop", "Close"} {
		t.Run(how, func(t *testing.T) {
			f := newFlaky()
			t.Cleanup(func() { _ = f.mem.Close() })
			opts, ch := reports(cooldown)
			br := guard.NewBreaker(closing{f}, opts)
			open(t, br, f)
			if c := next(t, ch, time.Second); c.String() != "closed->open" {
				t.Fatalf("change %v, want closed->open", c)
			}
			switch how {
			case "Stop":
				br.Stop()
				br.Stop() // twice is fine
			case "Close":
				if err := br.Store().(store.Closer).Close(); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case c := <-ch:
				t.Fatalf("stopped breaker reported %v from its timer", c)
			case <-time.After(5 * cooldown):
			}
			if br.State() != guard.HalfOpen {
				t.Fatalf("state %v after Cooldown, want half-open", br.State())
			}
			if c := next(t, ch, time.Second); c.String() != "open->half-open" {
				t.Fatalf("change %v, want open->half-open from State", c)
			}
			open(t, br, f) // a failed probe: open again, no timer
			if c := next(t, ch, time.Second); c.String() != "half-open->open" {
				t.Fatalf("change %v, want half-open->open", c)
			}
			select {
			case c := <-ch:
				t.Fatalf("stopped breaker reported %v from its timer", c)
			case <-time.After(5 * cooldown):
			}
		})
	}
}

// closing is flaky with a Close.
type closing struct{ *flaky }

func (closing) Close() error { return nil }

// Under concurrent calls, with a Cooldown so short that the timer and the
// calls race to turn the breaker half-open, the reports form one chain:
// each change starts from the state the one before it entered.
func TestBreakerReportsOneChainUnderRaces(t *testing.T) {
	f := newFlaky()
	var mu sync.Mutex
	var chain []string
	var bad atomic.Int64
	last := guard.Closed
	br := guard.NewBreaker(f, &guard.BreakerOptions{Cooldown: time.Millisecond, Probes: 1, OnStateChange: func(_ string, from, to guard.State) {
		mu.Lock()
		if from != last || from == to {
			bad.Add(1)
			chain = append(chain, fmt.Sprintf("[%v->%v after %v]", from, to, last))
		}
		last = to
		mu.Unlock()
	}})
	t.Cleanup(br.Stop)
	stop := time.Now().Add(300 * time.Millisecond)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			key := store.Key{Namespace: "n", Identity: "a"}
			for i := 0; time.Now().Before(stop); i++ {
				if (i/7+w)%3 == 0 {
					f.set(nil)
				} else {
					f.set(errDown)
				}
				_ = br.Store().Update(context.Background(), key, &step{})
				if i%5 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d reports broke the chain: %v", n, chain)
	}
}
