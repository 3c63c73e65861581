package prometheus

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// failing is a network store (not in-process) whose every update fails
// with err.
type failing struct{ err error }

func (f failing) Update(ctx context.Context, key store.Key, m store.Mutation) error { return f.err }

var errLost = store.UnknownOutcome(errors.New("reply lost"))

// newObserver returns an Observer on a registry of its own.
func newObserver(t testing.TB, opts Options) (*Observer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o, err := New(reg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return o, reg
}

func newLimiter(t testing.TB, cfg core.Config) *core.Limiter {
	t.Helper()
	if cfg.Algorithm == nil {
		cfg.Algorithm = algorithm.FixedWindow{}
	}
	if cfg.Store == nil {
		s := memory.New(&memory.Options{SweepInterval: -1})
		t.Cleanup(func() { s.Close() })
		cfg.Store = s
	}
	l, err := core.New(cfg)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return l
}

// scriptedRun makes a known sequence of decisions, reported to o, and
// returns the memory store it used:
//
//	api (limit 10/min): 12 calls for one identity: 10 allowed (the 9th
//	  and 10th past 8 = floor(10 × 0.8), near the limit), 2 denied;
//	dark (limit 2/min, shadow): 5 calls: all allowed, 3 shadow refusals;
//	open (fail open over a store that loses replies): 3 degraded, 3
//	  unknown, 3 timed store calls;
//	closed (fail closed over the same store): 2 errors, 2 unknown;
//	slots (concurrency 1): acquire (near the limit), acquire (denied),
//	  release; 2 timed acquires and 1 timed release; its key evicts one.
func scriptedRun(t testing.TB, o *Observer) *memory.Store {
	t.Helper()
	ctx := context.Background()
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
	// Room for two keys in one shard: the third key (erin's) evicts one
	// of the two before it, whose policies are done by then.
	mem := memory.New(&memory.Options{SweepInterval: -1, MaxKeys: 2, Shards: 1})
	t.Cleanup(func() { mem.Close() })
	minute := func(name string, limit int64) core.Policy {
		return core.Policy{Name: name, Limit: limit, Window: time.Minute}
	}
	api := newLimiter(t, core.Config{Policy: minute("api", 10), Store: mem, Clock: clock, Observer: o.Observe})
	for range 12 {
		if _, err := api.Allow(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	dark := newLimiter(t, core.Config{Policy: minute("dark", 2), Store: mem, Clock: clock, Shadow: true, Observer: o.Observe})
	for range 5 {
		if d, err := dark.Allow(ctx, "bob"); err != nil || !d.Allowed {
			t.Fatalf("shadow limiter: %+v, %v", d, err)
		}
	}
	open := newLimiter(t, core.Config{Policy: minute("open", 10), Store: failing{errLost}, Failure: core.FailOpen, Observer: o.Observe})
	for range 3 {
		if d, err := open.Allow(ctx, "carol"); err != nil || !d.Degraded {
			t.Fatalf("fail open: %+v, %v", d, err)
		}
	}
	closed := newLimiter(t, core.Config{Policy: minute("closed", 10), Store: failing{errLost}, Observer: o.Observe})
	for range 2 {
		if _, err := closed.Allow(ctx, "dave"); !errors.Is(err, core.ErrOutcomeUnknown) {
			t.Fatalf("fail closed: %v", err)
		}
	}
	slots := newLimiter(t, core.Config{Policy: core.Policy{Name: "slots", Limit: 1, Window: time.Minute}, Algorithm: algorithm.Concurrency{}, Store: mem, Clock: clock, Observer: o.Observe})
	lease, _, err := slots.Acquire(ctx, "erin")
	if err != nil || lease == nil {
		t.Fatalf("Acquire: %v, %v", lease, err)
	}
	if l2, d, err := slots.Acquire(ctx, "erin"); err != nil || l2 != nil || d.Allowed {
		t.Fatalf("second Acquire: %v %+v %v; want a refusal", l2, d, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return mem
}

// promtool returns the path of promtool. Without it the test is skipped,
// but fails when SLUICE_REQUIRE_SERVERS or CI is set (make test installs
// Debian's prometheus package, which has it: scripts/promtool.sh).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
		t.Fatalf("promtool is not on PATH: run the tests with `make test`, which installs it (scripts/promtool.sh)")
	}
	t.Skip("promtool is not on PATH; `make test` installs it (Debian's prometheus package)")
	return ""
}
