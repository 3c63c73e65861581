package conformance

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// stepPolicies are the policies the Steps check runs, chosen for their
// edges: a burst above the rate, a window that Limit does not divide (the
// interval rounds up), and defaults for Burst, MaxDelay and LeaseTTL. Every
// duration is long, so the store's own expiry (by its own clock) rarely
// comes into play; the model allows for it where it does.
var stepPolicies = []core.Policy{
	{Name: "steps-a", Limit: 5, Window: time.Hour, Burst: 8, MaxDelay: 25 * time.Minute, LeaseTTL: 40 * time.Minute},
	{Name: "steps-b", Limit: 7, Window: time.Hour + 3*time.Microsecond},
	{Name: "steps-c", Limit: 3, Window: 90 * time.Minute, Burst: 1, MaxDelay: time.Hour, LeaseTTL: 5 * time.Minute},
}

// op is one call of a step sequence.
type op struct {
	dt      time.Duration // clock step before the call; may be negative
	n       int64         // cost of a take (ignored for leases)
	release int           // for a Leaser: > 0 releases the release-th oldest lease held instead of acquiring
}

func (o op) String() string {
	if o.release > 0 {
		return fmt.Sprintf("{dt %v, release #%d}", o.dt, o.release)
	}
	return fmt.Sprintf("{dt %v, n %d}", o.dt, o.n)
}

// checkSteps runs scripted and random sequences through a fleet of two
// Limiters on the store, alternating, and through the algorithm's Go step,
// and requires every Decision to be equal, field by field.
func checkSteps(t testing.TB, e *env) {
	for i, p := range stepPolicies {
		if err := checkPolicy(e.alg, p); err != nil {
			continue // an algorithm may bound a policy further (CheckPolicy)
		}
		runSteps(t, e, p, "scripted", scriptedOps(e, p))
		// The first policy's sequence is the same in every run; the others
		// explore (the seed is in the failure message).
		seed := uint64(1)
		if i > 0 {
			seed = rand.Uint64()
		}
		r := rand.New(rand.NewPCG(seed, 0))
		runSteps(t, e, p, fmt.Sprintf("random (seed %d)", seed), randomOps(r, e, p, 120))
	}
}

func checkPolicy(alg core.Algorithm, p core.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if c, ok := alg.(core.PolicyChecker); ok {
		return c.CheckPolicy(&p)
	}
	return nil
}

// horizon is long enough for any key of p to go idle: past every TTL.
func horizon(p core.Policy) time.Duration {
	return 2*p.Window + core.Micros(p.Capacity()*p.IntervalMicros()+p.MaxDelayMicros()+p.LeaseTTLMicros())
}

// scriptedOps covers the named cases: filling to the quota and one past it,
// refill by one interval, roll-over into the next window, n > 1 and n =
// quota, a clock that moves backwards, and a key idle past its TTL.
func scriptedOps(e *env, p core.Policy) []op {
	q := e.quota(p)
	iv := core.Micros(p.IntervalMicros())
	w := p.Window
	if e.leaser != nil {
		lt := core.Micros(p.LeaseTTLMicros())
		var ops []op
		for range q + 1 {
			ops = append(ops, op{}) // the last is denied
		}
		return append(ops,
			op{release: 1}, op{}, op{}, // a released slot is reusable, once
			op{dt: lt / 2}, op{release: 2}, op{},
			op{dt: lt / 2}, op{}, op{}, // the first leases reach their TTL
			op{dt: time.Microsecond}, op{}, op{release: 1}, op{release: 1},
			op{dt: -lt / 3}, op{}, op{release: 1}, // backwards
			op{dt: horizon(p)}, op{}, op{}, // idle past every TTL
		)
	}
	var ops []op
	for range q + 1 {
		ops = append(ops, op{n: 1}) // the last is denied
	}
	return append(ops,
		op{dt: iv, n: 1}, op{dt: iv / 2, n: 1}, op{dt: iv / 2, n: 1}, // refill
		op{dt: w, n: 1}, op{n: q}, op{n: 1}, // roll-over, n = quota
		op{dt: w, n: q}, op{dt: time.Microsecond, n: 1},
		op{dt: w / 2, n: min(2, q)}, op{dt: time.Microsecond, n: min(2, q)}, op{n: min(2, q)},
		op{dt: -w / 3, n: 1}, op{dt: -w, n: 1}, op{n: 1}, // backwards
		op{dt: w - time.Microsecond, n: 1}, op{dt: 2 * iv, n: q},
		op{dt: horizon(p), n: 1}, op{n: q}, op{n: 1}, // idle past every TTL
	)
}

// randomOps draws count operations: clock steps spread around the policy's
// interval and window (some backwards), costs of 1, of the quota and in
// between, and for a Leaser releases of held leases.
func randomOps(r *rand.Rand, e *env, p core.Policy, count int) []op {
	q := e.quota(p)
	iv := core.Micros(p.IntervalMicros())
	w := p.Window
	if e.leaser != nil {
		w = core.Micros(p.LeaseTTLMicros())
	}
	steps := []time.Duration{0, 0, 0, time.Microsecond, iv / 2, iv, iv + time.Microsecond, 2 * iv,
		w / 3, w / 2, w - time.Microsecond, w, w + time.Microsecond, 3 * w, -iv, -w / 4}
	ops := make([]op, count)
	for i := range ops {
		ops[i].dt = steps[r.IntN(len(steps))]
		switch x := r.IntN(10); {
		case x < 6:
			ops[i].n = 1
		case x < 8:
			ops[i].n = 1 + r.Int64N(q)
		default:
			ops[i].n = q
		}
		if e.leaser != nil && r.IntN(3) == 0 {
			ops[i].release = 1 + r.IntN(3)
		}
	}
	return ops
}

// runSteps runs ops on a fresh key through the store and the model.
func runSteps(t testing.TB, e *env, p core.Policy, name string, ops []op) {
	t.Helper()
	clock := core.NewManualClock(epoch)
	fleet := e.fleet(t, p, clock, clock)
	id := identity(t, fleet[0])
	m := newModel(e.model, p)
	var held []*core.Lease
	var placeholder uint64 = 1 << 62
	fail := func(i int, format string, args ...any) {
		t.Helper()
		lo := max(0, i-8)
		var hist []string
		for j := lo; j <= i; j++ {
			hist = append(hist, fmt.Sprintf("%d:%v", j, ops[j]))
		}
		t.Fatalf("%s on %v, %s sequence, call %d %v (ManualClock %s):\n%s\n\tlast calls: %s",
			e.alg.Name(), p, name, i, ops[i], clock.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...), strings.Join(hist, " "))
	}
	for i, o := range ops {
		clock.Advance(o.dt)
		now := clock.Now().UnixMicro()
		l := fleet[i%len(fleet)]
		start := time.Now()
		switch {
		case e.leaser != nil && o.release > 0:
			if len(held) == 0 {
				continue
			}
			j := (o.release - 1) % len(held)
			lease := held[j]
			held = append(held[:j], held[j+1:]...)
			if err := lease.Release(t.Context()); err != nil {
				fail(i, "Release: %v", err)
			}
			m.observe(t, now, call{lease: lease.ID(), release: true}, core.Decision{}, start, time.Now())
		case e.leaser != nil:
			lease, got, err := l.Acquire(t.Context(), id)
			end := time.Now()
			if err != nil {
				fail(i, "Acquire: %v", err)
			}
			c := call{lease: placeholder}
			placeholder++
			if got.Allowed {
				c.lease = lease.ID()
				held = append(held, lease)
			}
			if ok, want := m.observe(t, now, c, got, start, end); !ok {
				fail(i, "\tstore   %+v\n\tGo step %+v", got, want)
			}
		default:
			got, err := l.AllowN(t.Context(), id, o.n)
			end := time.Now()
			if err != nil {
				fail(i, "AllowN(%d): %v", o.n, err)
			}
			if ok, want := m.observe(t, now, call{n: o.n}, got, start, end); !ok {
				fail(i, "\tstore   %+v\n\tGo step %+v", got, want)
			}
		}
	}
}
