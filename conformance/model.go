package conformance

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// This file is the specification side of every comparison: the algorithm's
// Go step, applied serially to state the suite keeps itself.

// call is one operation on a key's state: a take of n units, an acquire or a
// release of a lease.
type call struct {
	n       int64
	lease   uint64
	release bool
}

// apply runs c through the Go step.
func apply(alg core.Algorithm, p *core.Policy, state []byte, now int64, c call) ([]byte, time.Duration, core.Decision) {
	state = clone(state) // Step may write into its argument's backing array
	if l, ok := alg.(core.Leaser); ok {
		if c.release {
			next, ttl := l.Release(state, now, c.lease, p)
			return next, ttl, core.Decision{}
		}
		return l.Acquire(state, now, c.lease, p)
	}
	return alg.Step(state, now, c.n, p)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// batch applies count identical calls (cost n; for a Leaser, acquires with
// ids counting up from *lease) at one instant and returns the state after
// them and their decisions. A denial that writes nothing leaves the state as
// it was, so every identical call after it is denied alike: those are
// copied, not recomputed.
func batch(alg core.Algorithm, p *core.Policy, state []byte, now, n int64, count int, lease *uint64) ([]byte, []core.Decision) {
	state, ds, _ := batchStill(alg, p, state, now, n, count, lease)
	return state, ds
}

// batchStill is batch, and also returns after how many calls the state
// stood still for good (count when it never did).
func batchStill(alg core.Algorithm, p *core.Policy, state []byte, now, n int64, count int, lease *uint64) ([]byte, []core.Decision, int) {
	ds := make([]core.Decision, 0, count)
	still := count
	for len(ds) < count {
		*lease++
		next, _, d := apply(alg, p, state, now, call{n: n, lease: *lease})
		ds = append(ds, d)
		if next != nil {
			state = next
			continue
		}
		if !d.Allowed {
			still = len(ds) - 1
			for len(ds) < count {
				ds = append(ds, d)
			}
		}
	}
	return state, ds, still
}

// serial is the sequence of decisions that count identical calls at one
// instant meet, from a fresh key. Every order of identical calls is the same
// sequence, so a store that decides them concurrently must hand out exactly
// these decisions.
func serial(alg core.Algorithm, p core.Policy, now time.Time, n int64, count int) []core.Decision {
	var lease uint64
	_, ds := batch(alg, &p, nil, now.UnixMicro(), n, count, &lease)
	return ds
}

// mostBetween is the most calls admitted, from a fresh key, when n0 calls
// are made at t0 and n1 at t1 > t0, in any order. It tries the orders "k
// calls at t0, the n1 calls at t1, the rest at t0" for every k, and the
// mirror family (some calls at t1 first). These cover every order for an
// algorithm that reads a clock stepping back as standing still (once a call
// at t1 is decided, later calls at t0 decide as at t1), and bound every
// order for one that judges such a call more strictly: each of package
// algorithm does one or the other.
func mostBetween(alg core.Algorithm, p core.Policy, t0, t1 time.Time, n int64, n0, n1 int) int {
	a, b := t0.UnixMicro(), t1.UnixMicro()
	hi := 0
	// Past the point where the first batch stands still, a larger k changes
	// only how many calls trail at the end, and the calls of a batch admit
	// more the more there are: the most is at that point.
	for k := 0; k <= still(alg, p, a, n, n0); k++ {
		hi = max(hi, admittedIn(alg, p, n, phase{a, k}, phase{b, n1}, phase{a, n0 - k}))
	}
	for j := 0; j <= still(alg, p, b, n, n1); j++ {
		hi = max(hi, admittedIn(alg, p, n, phase{b, j}, phase{a, n0}, phase{b, n1 - j}))
	}
	return hi
}

// splitBetween bounds the calls admitted, from a fresh key, when m calls
// are made, each at t0 or at t1 > t0 (how many at each unknown), in the
// orders "k calls at t0, then the rest at t1" and "j calls at t1, then the
// rest at t0". The second family is where an algorithm that judges a clock
// stepping back more strictly (GCRA) admits fewer.
func splitBetween(alg core.Algorithm, p core.Policy, t0, t1 time.Time, n int64, m int) (lo, hi int) {
	a, b := t0.UnixMicro(), t1.UnixMicro()
	lo, hi = m+1, -1
	try := func(first, second int64, k int) {
		got := admittedIn(alg, p, n, phase{first, k}, phase{second, m - k})
		lo, hi = min(lo, got), max(hi, got)
	}
	// As in mostBetween; past the still point the fewest is at k = m.
	for _, x := range [][2]int64{{a, b}, {b, a}} {
		for k := 0; k <= still(alg, p, x[0], n, m); k++ {
			try(x[0], x[1], k)
		}
		try(x[0], x[1], m)
	}
	return lo, hi
}

// phase is count identical calls at now.
type phase struct {
	now   int64
	count int
}

// admittedIn is how many calls of cost n the phases admit, in order, from a
// fresh key.
func admittedIn(alg core.Algorithm, p core.Policy, n int64, phases ...phase) int {
	var state []byte
	var lease uint64
	c := 0
	for _, ph := range phases {
		var ds []core.Decision
		state, ds = batch(alg, &p, state, ph.now, n, ph.count, &lease)
		c += admitted(ds)
	}
	return c
}

// still is after how many of count identical calls at now, from a fresh
// key, the state stands still for good.
func still(alg core.Algorithm, p core.Policy, now, n int64, count int) int {
	var lease uint64
	_, _, k := batchStill(alg, &p, nil, now, n, count, &lease)
	return k
}

func admitted(ds []core.Decision) int {
	c := 0
	for _, d := range ds {
		if d.Allowed {
			c++
		}
	}
	return c
}

// model follows one key through a sequence of calls, as the Go step decides
// them. A store may expire keys by its own clock, which the ManualClock of a
// check does not move (a key written with a short TTL may vanish between two
// calls though the ManualClock says it is still live), or by the Limiter's.
// So the model keeps every state the store may hold (branches): after each
// call, the ones whose decision matches the store's answer.
type model struct {
	alg     core.Algorithm
	p       core.Policy
	flagged bool // an algorithm defect was reported; report it once
	// branches are the states the store may hold; nil state means absent.
	branches []branch
}

type branch struct {
	state []byte
	now   int64         // ManualClock time of the last write
	wall  time.Time     // wall time just before the call that wrote began
	ttl   time.Duration // TTL of the last write
}

func newModel(alg core.Algorithm, p core.Policy) *model {
	return &model{alg: alg, p: p, branches: []branch{{}}}
}

// observe applies c at now to every branch and keeps the branches that
// decide got (for a release, which decides nothing, every branch). start and
// end are wall times taken just before and after the store's call. It
// reports whether any branch matched, and the first branch's decision.
func (m *model) observe(t testing.TB, now int64, c call, got core.Decision, start, end time.Time) (bool, core.Decision) {
	t.Helper()
	var kept []branch
	var want core.Decision
	for i, b := range m.branches {
		states := []branch{b}
		// The store may have expired the key if its TTL has run out since
		// the write, by the store's own clock (at most end - b.wall has
		// passed) or by the Limiter's (an in-process store may expire on
		// the decisions' time line: inproc.Timed).
		if b.state != nil && (end.Sub(b.wall) >= b.ttl || now >= b.now+int64(b.ttl/time.Microsecond)) {
			states = append(states, branch{})
		}
		for j, s := range states {
			next, ttl, d := apply(m.alg, &m.p, s.state, now, c)
			if i == 0 && j == 0 {
				want = d
			}
			m.checkStep(t, s, now, c, next, ttl, d)
			if !c.release && d != got {
				continue
			}
			if next != nil {
				s = branch{state: next, now: now, wall: start, ttl: ttl}
			}
			kept = appendBranch(kept, s)
		}
	}
	if len(kept) == 0 {
		return false, want
	}
	m.branches = kept
	return true, want
}

func appendBranch(bs []branch, b branch) []branch {
	for _, x := range bs {
		if bytes.Equal(x.state, b.state) && (x.state == nil) == (b.state == nil) && x.now == b.now && x.ttl == b.ttl {
			return bs
		}
	}
	return append(bs, b)
}

// checkStep holds the algorithm to the Store contract: a write carries a
// positive TTL, and a key idle past its TTL (by the algorithm's own clock)
// decides as an absent one, since a store may drop it then.
func (m *model) checkStep(t testing.TB, s branch, now int64, c call, next []byte, ttl time.Duration, d core.Decision) {
	t.Helper()
	if m.flagged {
		return
	}
	if next != nil && ttl <= 0 {
		m.flagged = true
		t.Errorf("algorithm %s: a write at %d (%+v) has TTL %v: the key would never expire", m.alg.Name(), now, c, ttl)
	}
	if s.state == nil || c.release || now < s.now+int64(s.ttl/time.Microsecond) {
		return
	}
	_, _, fresh := apply(m.alg, &m.p, nil, now, c)
	if fresh != d {
		m.flagged = true
		t.Errorf("algorithm %s (%v): a key written at %d with TTL %v may be dropped by then, but at %d (%+v) its state decides\n\t%+v\nwhere an absent key decides\n\t%+v",
			m.alg.Name(), m.p, s.now, s.ttl, now, c, d, fresh)
	}
}
