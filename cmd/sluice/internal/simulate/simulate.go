// Package simulate replays traffic patterns through every algorithm under a
// simulated clock, for `sluice simulate`: who is admitted when, the worst
// burst any trailing window saw, and a plot of admissions over time.
//
// A simulation runs the real code path, a core.Limiter on a memory store,
// with a core.ManualClock that jumps from one request to the next, so an
// hour of traffic takes milliseconds and every run is the same.
package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// Request is one arrival: when (from the start), for whom, at what cost.
type Request struct {
	At     time.Duration
	Tenant string
	N      int64
}

// Pattern names a traffic shape and builds its arrivals for a policy.
type Pattern struct {
	Name        string
	Description string
	// Build returns the first arrivals, sorted by At, over about d.
	Build func(p core.Policy, d time.Duration, seed uint64) []Request
	// RetryAfter, when set, is how long a denied client waits before it
	// tries again, up to MaxRetries times: the clients ignore Retry-After.
	RetryAfter time.Duration
	MaxRetries int
	// Seeded says that Build draws from its seed: the arrivals of the
	// others are the same for every seed.
	Seeded bool
}

// Patterns are the shapes `sluice simulate` knows.
var Patterns = []Pattern{
	{"steady", "one client at 1.5× the limit, evenly spaced", steady, 0, 0, false},
	{"boundary", "one client bursts the whole limit just before a window edge and again just after it", boundary, 0, 0, false},
	{"retry-storm", "eight clients share one key at twice the limit, and retry every denial 50 ms later (up to 5 times), ignoring Retry-After", retryStorm, 50 * time.Millisecond, 5, true},
	{"tenants", "one heavy tenant at 5× the limit and three light ones at half of it, each limited on its own key", tenants, 0, 0, true},
}

// PatternByName returns the pattern called name.
func PatternByName(name string) (Pattern, error) {
	for _, p := range Patterns {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, len(Patterns))
	for i, p := range Patterns {
		names[i] = p.Name
	}
	return Pattern{}, fmt.Errorf("unknown pattern %q (known: %v)", name, names)
}

func steady(p core.Policy, d time.Duration, _ uint64) []Request {
	gap := time.Duration(float64(p.Window) / (1.5 * float64(p.Limit)))
	if gap <= 0 {
		gap = time.Microsecond
	}
	var rs []Request
	for at := time.Duration(0); at < d; at += gap {
		rs = append(rs, Request{At: at, Tenant: "client", N: 1})
	}
	return rs
}

// boundary sends Limit requests in the last tenth of a window and Limit
// more in the first tenth of the next, once per three windows: the fixed
// window admits both bursts, 2·Limit within one window's length.
func boundary(p core.Policy, d time.Duration, _ uint64) []Request {
	var rs []Request
	tenth := p.Window / 10
	for edge := p.Window; edge < d; edge += 3 * p.Window {
		for _, start := range []time.Duration{edge - tenth, edge} {
			for i := int64(0); i < p.Limit; i++ {
				// In float: i × tenth can overflow a Duration.
				rs = append(rs, Request{At: start + time.Duration(float64(tenth)*float64(i)/float64(p.Limit)), Tenant: "client", N: 1})
			}
		}
	}
	return rs
}

func tenants(p core.Policy, d time.Duration, seed uint64) []Request {
	r := rand.New(rand.NewPCG(seed, 7))
	var rs []Request
	add := func(name string, perWindow float64) {
		mean := float64(p.Window) / perWindow
		for at := time.Duration(r.ExpFloat64() * mean); at < d; at += time.Duration(r.ExpFloat64() * mean) {
			rs = append(rs, Request{At: at, Tenant: name, N: 1})
		}
	}
	add("heavy", 5*float64(p.Limit))
	for _, name := range []string{"light-1", "light-2", "light-3"} {
		add(name, 0.5*float64(p.Limit))
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].At < rs[j].At })
	return rs
}

// Result is what one algorithm did with one pattern.
type Result struct {
	Algorithm string
	Offered   int // requests tried, retries included
	Admitted  int
	Rejected  int
	// WorstBurst is the most units admitted for one tenant in any trailing
	// window of the policy's length (the fixed window's boundary burst
	// shows here).
	WorstBurst int64
	// Delayed counts the admissions that were queued (given a Delay > 0,
	// leaky bucket): admitted, but started late.
	Delayed int
	// MaxDelay is the longest queueing delay given (leaky bucket).
	MaxDelay time.Duration
	// PerTenant counts admissions per tenant.
	PerTenant map[string]int
	// Starts are the instants admitted units started (after any Delay),
	// one entry per unit, sorted; ByTenant holds the same per tenant.
	Starts   []time.Duration
	ByTenant map[string][]time.Duration
}

// event is a pending arrival, retry or lease release of a run.
type event struct {
	at      time.Duration
	seq     int // the order of pushing, among events at one instant
	req     Request
	retry   int
	release *core.Lease
}

// eventQueue is a run's pending events, earliest (then first pushed) first.
type eventQueue struct {
	evs  []event
	next int
}

func (q *eventQueue) push(e event) {
	e.seq = q.next
	q.next++
	heap.Push(q, e)
}

func (q *eventQueue) Len() int { return len(q.evs) }
func (q *eventQueue) Less(i, j int) bool {
	a, b := &q.evs[i], &q.evs[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}
func (q *eventQueue) Swap(i, j int) { q.evs[i], q.evs[j] = q.evs[j], q.evs[i] }
func (q *eventQueue) Push(x any)    { q.evs = append(q.evs, x.(event)) }
func (q *eventQueue) Pop() any {
	e := q.evs[len(q.evs)-1]
	q.evs = q.evs[:len(q.evs)-1]
	return e
}

// Hold is how long the concurrency algorithm's requests keep their lease.
func Hold(p core.Policy) time.Duration { return p.Window / time.Duration(p.Limit) * 2 }

// Run replays pattern through alg under p for d and returns what happened.
func Run(alg core.Algorithm, p core.Policy, pat Pattern, d time.Duration, seed uint64) (Result, error) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := core.NewManualClock(start)
	store := memory.New(&memory.Options{Clock: clock, SweepInterval: -1})
	defer store.Close()
	l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: store, Clock: clock})
	if err != nil {
		return Result{}, err
	}
	res := Result{Algorithm: alg.Name(), PerTenant: map[string]int{}, ByTenant: map[string][]time.Duration{}}
	ctx := context.Background()

	// Pending events, in time order: arrivals, retries, lease releases.
	// Of two at one instant, the one pushed first comes first (arrivals in
	// their order, then what the run pushed): a heap, as a sorted slice
	// took O(n) a push, and a run of a million events minutes.
	arrivals := pat.Build(p, d, seed)
	evs := &eventQueue{}
	for _, r := range arrivals {
		// Algorithms count whole microseconds: so does the simulation, or
		// a sub-µs remainder would make the bound look broken.
		r.At = r.At.Truncate(time.Microsecond)
		evs.push(event{at: r.At, req: r})
	}
	push := evs.push
	for evs.Len() > 0 {
		e := heap.Pop(evs).(event)
		clock.Set(start.Add(e.at))
		if e.release != nil {
			if err := e.release.Release(ctx); err != nil {
				return res, err
			}
			continue
		}
		res.Offered++
		var dec core.Decision
		if _, ok := alg.(core.Leaser); ok {
			lease, d, err := l.Acquire(ctx, e.req.Tenant)
			if err != nil {
				return res, err
			}
			dec = d
			if lease != nil {
				push(event{at: e.at + Hold(p), release: lease})
			}
		} else {
			d, err := l.AllowN(ctx, e.req.Tenant, e.req.N)
			if err != nil {
				return res, err
			}
			dec = d
		}
		if !dec.Allowed {
			res.Rejected++
			if pat.RetryAfter > 0 && e.retry < pat.MaxRetries {
				push(event{at: e.at + pat.RetryAfter, req: e.req, retry: e.retry + 1})
			}
			continue
		}
		res.Admitted++
		res.PerTenant[e.req.Tenant]++
		res.MaxDelay = max(res.MaxDelay, dec.Delay)
		if dec.Delay > 0 {
			res.Delayed++
		}
		for range e.req.N {
			res.Starts = append(res.Starts, e.at+dec.Delay)
			res.ByTenant[e.req.Tenant] = append(res.ByTenant[e.req.Tenant], e.at+dec.Delay)
		}
	}
	slices.Sort(res.Starts)
	for _, starts := range res.ByTenant {
		slices.Sort(starts)
		res.WorstBurst = max(res.WorstBurst, worstBurst(starts, p.Window))
	}
	return res, nil
}

// retryStorm: eight clients behind one key (one NAT address, say), each
// sending at a quarter of the limit's rate, twice the limit together.
func retryStorm(p core.Policy, d time.Duration, seed uint64) []Request {
	r := rand.New(rand.NewPCG(seed, 9))
	gap := time.Duration(4 * float64(p.Window) / float64(p.Limit))
	var rs []Request
	for c := 0; c < 8; c++ {
		for at := time.Duration(r.Int64N(int64(gap) + 1)); at < d; at += gap {
			rs = append(rs, Request{At: at, Tenant: "shared", N: 1})
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].At < rs[j].At })
	return rs
}

// worstBurst is the most entries of sorted starts within any window of
// length w: a trailing window (t−w, t] ending at each start.
func worstBurst(starts []time.Duration, w time.Duration) int64 {
	var best int64
	lo := 0
	for hi, t := range starts {
		for starts[lo] <= t-w {
			lo++
		}
		best = max(best, int64(hi-lo+1))
	}
	return best
}
