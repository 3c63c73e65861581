package conformance

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// The model is the yardstick of every check; these tests pin its
// arithmetic on cases worked out by hand.

func TestSerial(t *testing.T) {
	p := core.Policy{Name: "p", Limit: 5, Window: time.Hour}
	ds := serial(algorithm.FixedWindow{}, p, epoch, 1, 8)
	if got := admitted(ds); got != 5 {
		t.Fatalf("admitted %d of 8, want 5", got)
	}
	for i, d := range ds[:5] {
		if d.Remaining != int64(4-i) {
			t.Errorf("call %d: Remaining %d, want %d", i, d.Remaining, 4-i)
		}
	}
	if ds[7] != ds[5] {
		t.Errorf("denials after the quota differ: %+v, %+v", ds[5], ds[7])
	}
}

func TestBetween(t *testing.T) {
	p := core.Policy{Name: "p", Limit: 5, Window: time.Hour}
	hour := epoch.Truncate(time.Hour)
	cases := []struct {
		name          string
		alg           core.Algorithm
		t0, t1        time.Time
		most          int // 20 calls at t0, 20 at t1
		fewest, split int // 20 calls, each at t0 or t1
	}{
		// Both instants in one window: the quota, whatever the order.
		{"fixed window, one window", algorithm.FixedWindow{}, hour.Add(time.Minute), hour.Add(59 * time.Minute), 5, 5, 5},
		// Across a boundary: a quota on each side when calls at t0 go
		// first; one quota when a call at t1 goes first (t0 then stands
		// still at t1).
		{"fixed window, across a boundary", algorithm.FixedWindow{}, hour.Add(-time.Minute), hour.Add(time.Minute), 10, 5, 10},
		// Two intervals (12 minutes each) apart: two tokens more at most.
		// A call at t0 after three at t1 is judged by the earlier now,
		// against the time the bucket is full again, as GCRA judges it:
		// as few as 3 in all.
		{"token bucket, two intervals", algorithm.TokenBucket{}, epoch, epoch.Add(24 * time.Minute), 7, 3, 7},
		// A minute apart: GCRA judges a call at t0 after four at t1 by
		// the earlier now, and denies the last slot.
		{"gcra, a minute", algorithm.GCRA{}, epoch, epoch.Add(time.Minute), 5, 4, 5},
	}
	for _, c := range cases {
		if got := mostBetween(c.alg, p, c.t0, c.t1, 1, 20, 20); got != c.most {
			t.Errorf("%s: mostBetween = %d, want %d", c.name, got, c.most)
		}
		if lo, hi := splitBetween(c.alg, p, c.t0, c.t1, 1, 20); lo != c.fewest || hi != c.split {
			t.Errorf("%s: splitBetween = [%d, %d], want [%d, %d]", c.name, lo, hi, c.fewest, c.split)
		}
	}
}

// A store may drop a key once its TTL has passed by the store's own clock:
// the model accepts a fresh decision then, and only then.
func TestModelAllowsExpiryByWallClock(t *testing.T) {
	p := core.Policy{Name: "p", Limit: 2, Window: time.Hour}
	alg := algorithm.FixedWindow{}
	end := epoch.Truncate(time.Hour).Add(time.Hour)
	now := end.Add(-10 * time.Microsecond).UnixMicro() // the write's TTL is 10µs
	wall := time.Unix(1000, 0)
	first := serial(alg, p, time.UnixMicro(now), 1, 2)
	for _, c := range []struct {
		name    string
		elapsed time.Duration // wall time between the write and the next call's end
		ok      bool
	}{{"TTL passed", 10 * time.Microsecond, true}, {"TTL not passed", 5 * time.Microsecond, false}} {
		m := newModel(alg, p)
		if ok, _ := m.observe(t, now, call{n: 1}, first[0], wall, wall); !ok {
			t.Fatalf("%s: the first call's own decision was refused", c.name)
		}
		// The store answers as for an absent key: the first decision again.
		ok, _ := m.observe(t, now, call{n: 1}, first[0], wall, wall.Add(c.elapsed))
		if ok != c.ok {
			t.Errorf("%s: a fresh decision was accepted: %v, want %v", c.name, ok, c.ok)
		}
		if ok, _ := newModel(alg, p).observe(t, now, call{n: 1}, first[1], wall, wall); ok {
			t.Errorf("%s: the second decision was accepted for a first call", c.name)
		}
	}
}
