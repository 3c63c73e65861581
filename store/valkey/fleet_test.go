package valkey_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/valkey"
)

// fleetPolicy is the limit two instances share in the fleet tests.
var fleetPolicy = core.Policy{Name: "fleet", Limit: 25, Window: 2 * time.Second}

const fleetCalls = 200

// fleetTimeout is each call's deadline: generous, because these tests
// check what is decided, not how fast, on a machine that may be loaded.
const fleetTimeout = 10 * time.Second

// fleet returns two Limiters for alg, each on a valkey-go client of its
// own (two instances of one deployment), sharing keys.
// With generic, they take the read-modify-write path (Config.NoScript).
func fleet(t *testing.T, addrs []string, alg core.Algorithm, clock core.Clock, prefix string, generic bool) [2]*core.Limiter {
	t.Helper()
	var ls [2]*core.Limiter
	for i := range ls {
		c := newClient(t, addrs)
		l, err := core.New(core.Config{Policy: fleetPolicy, Algorithm: alg, Store: valkey.New(c, nil), Clock: clock, Prefix: prefix, Timeout: fleetTimeout, NoScript: generic})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	return ls
}

// hammer makes fleetCalls concurrent calls for id, alternating between the
// instances, and returns the decisions and how many calls were decided. A
// compare-and-set loop may give up under this much contention
// (core.ErrContention); any other error fails the test.
func hammer(t *testing.T, ls [2]*core.Limiter, id string) (ds []core.Decision, decided int) {
	t.Helper()
	ds = make([]core.Decision, fleetCalls)
	errs := make([]error, fleetCalls)
	var wg sync.WaitGroup
	for i := range ds {
		wg.Go(func() { ds[i], errs[i] = ls[i%2].Allow(context.Background(), id) })
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			decided++
		case !errors.Is(err, core.ErrContention):
			t.Errorf("call %d: %v", i, err)
		}
	}
	return ds, decided
}

// TestFleetAdmitsExactly: 200 concurrent checks through two separate
// clients, at one instant of an injected clock, admit exactly what the
// algorithm's Go step admits for 200 calls in a row (25 for every rate
// algorithm under 25 per 2 s), and every denial says when to retry. On the
// script path and on the generic (compare-and-set) path.
func TestFleetAdmitsExactly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, generic := range []bool{false, true} {
			path := "script"
			if generic {
				path = "generic"
			}
			t.Run(path, func(t *testing.T) { fleetAdmitsExactly(t, b, generic) })
		}
	})
}

func fleetAdmitsExactly(t *testing.T, b backend, generic bool) {
	for _, alg := range allAlgorithms {
		if _, ok := alg.(core.Leaser); ok {
			continue // leases: the conformance suite's InFlight check
		}
		t.Run(alg.Name(), func(t *testing.T) {
			clock := core.NewManualClock(time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC))
			prefix := "sluice-valkey-test-" + randomHex(t)
			ls := fleet(t, b.addrs(t), alg, clock, prefix, generic)
			id := randomHex(t)
			t.Cleanup(func() { _ = ls[0].Reset(context.Background(), id) })

			want := 0
			var state []byte
			for range fleetCalls {
				next, _, d := alg.Step(state, clock.Now().UnixMicro(), 1, &fleetPolicy)
				if d.Allowed {
					want++
				}
				if next != nil {
					state = next
				}
			}
			if name := alg.Name(); (name == "gcra" || name == "sliding-log") && want != 25 {
				t.Fatalf("the Go step admits %d of %d at one instant, want 25", want, fleetCalls)
			}
			ds, decided := hammer(t, ls, id)
			admitted := 0
			for i, d := range ds {
				switch {
				case d.Allowed:
					admitted++
				case d.RetryAfter <= 0 && d.Limit != 0:
					t.Errorf("call %d: denied with RetryAfter %v", i, d.RetryAfter)
				}
			}
			t.Logf("%d of %d calls decided, %d admitted", decided, fleetCalls, admitted)
			// At one instant the Go step admits the first want calls of
			// any order and denies the rest, so as long as want calls
			// were decided, exactly want are admitted.
			if decided < want {
				t.Fatalf("only %d of %d calls were decided (contention)", decided, fleetCalls)
			}
			if admitted != want {
				t.Fatalf("admitted %d of %d concurrent calls (%d decided), want exactly %d", admitted, fleetCalls, decided, want)
			}
		})
	}
}

// TestFleetServerClock: the same with no Clock, so the scripts read the
// server's TIME. The run takes real time, during which GCRA earns units
// back (one per 80 ms) and the sliding log's window slides, so the bound
// grows with the time the run took; never fewer than the burst of 25.
func TestFleetServerClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, name := range []string{"gcra", "sliding-log"} {
			alg := algorithmNamed(t, name)
			t.Run(name, func(t *testing.T) {
				ls := fleet(t, b.addrs(t), alg, nil, "sluice-valkey-test-"+randomHex(t), false)
				id := randomHex(t)
				t.Cleanup(func() { _ = ls[0].Reset(context.Background(), id) })
				start := time.Now()
				ds, _ := hammer(t, ls, id)
				elapsed := time.Since(start)
				admitted := 0
				for i, d := range ds {
					switch {
					case d.Allowed:
						admitted++
					case d.RetryAfter <= 0:
						t.Errorf("call %d: denied with RetryAfter %v", i, d.RetryAfter)
					}
				}
				var bound int
				switch name {
				case "gcra":
					iv := fleetPolicy.Window / time.Duration(fleetPolicy.Limit)
					bound = 25 + int(elapsed/iv) + 1
				case "sliding-log":
					bound = 25 * (1 + int(elapsed/fleetPolicy.Window))
				}
				if admitted < 25 || admitted > bound {
					t.Fatalf("admitted %d of %d in %v, want 25 to %d", admitted, fleetCalls, elapsed, bound)
				}
			})
		}
	})
}

func algorithmNamed(t *testing.T, name string) core.Algorithm {
	t.Helper()
	for _, a := range allAlgorithms {
		if a.Name() == name {
			return a
		}
	}
	t.Fatalf("no algorithm %q", name)
	return nil
}
