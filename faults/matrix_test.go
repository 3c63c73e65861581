package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// The bounds every cell of the matrix is held to.
const (
	// callTimeout is each Limiter's Timeout (core.DefaultTimeout).
	callTimeout = core.DefaultTimeout
	// slack is how much later than callTimeout a call may return.
	slack = 20 * time.Millisecond
	// fastBound is how long a call the open breaker refused may take: no
	// round trip, only the failure mode (generous for a loaded machine
	// under the race detector; the table shows the real figures).
	fastBound = 20 * time.Millisecond
	// recoveryBound is how soon after the fault ends decisions must be the
	// store's again.
	recoveryBound = time.Second
)

// The phases of one cell, and its load.
const (
	healthyPhase = 300 * time.Millisecond
	faultPhase   = 1200 * time.Millisecond
	// settled is how long a mode must go without a failure, after the
	// fault ends, for the cell to stop.
	settled = 300 * time.Millisecond
	// tailBound ends the cell even if failures go on.
	tailBound = 2500 * time.Millisecond
	// workers call each limiter at once, each pausing pace between calls.
	workers = 2
	pace    = 3 * time.Millisecond
)

// matrixPolicy is never refused: every request the store decides is
// admitted and counted, so the count read back afterwards shows whether
// any request was counted twice. A fixed window a day long (a window that
// rolls over during a cell, once in about 30,000 runs, would fail it).
var matrixPolicy = core.Policy{Name: "matrix", Limit: core.MaxLimit, Window: 24 * time.Hour}

// env is what a fault acts on.
type env struct {
	t      testing.TB
	srv    *server  // the server behind the proxy
	px     *proxy   // nil on a cluster
	cl     *cluster // nil but on a cluster
	victim *server  // the cluster master the fault takes away
	done   chan struct{}
	wg     sync.WaitGroup
}

type fault struct {
	name    string
	stores  []string // the store kinds it applies to
	cluster bool
	// failing says that the fault makes calls fail. When false (SCRIPT
	// FLUSH), the declared outcome is that no call fails at all.
	failing bool
	// down is how long the fault lasts. Default faultPhase.
	down          time.Duration
	inject, heal  func(e *env)
	memcacheLoses bool // memcached keeps no state across the fault
}

var (
	allStores   = []string{"redis", "valkey", "memcache"}
	redisStores = []string{"redis", "valkey"}
)

var faults = []fault{
	{name: "kill", stores: allStores, failing: true, memcacheLoses: true,
		inject: func(e *env) { e.srv.Kill() }, heal: func(e *env) { e.srv.Start() }},
	{name: "stall", stores: allStores, failing: true,
		inject: func(e *env) { e.px.add("latency", `{"latency":300}`) }, heal: func(e *env) { e.px.clear() }},
	{name: "reset peer", stores: allStores, failing: true,
		inject: func(e *env) { e.px.add("reset_peer", `{"timeout":0}`) }, heal: func(e *env) { e.px.clear() }},
	{name: "bandwidth", stores: allStores, failing: true,
		inject: func(e *env) { e.px.add("bandwidth", `{"rate":1}`) }, heal: func(e *env) { e.px.clear() }},
	{name: "restart", stores: allStores, failing: true, down: 100 * time.Millisecond, memcacheLoses: true,
		inject: func(e *env) { e.srv.Stop() }, heal: func(e *env) { e.srv.Start() }},
	{name: "script flush", stores: redisStores, failing: false,
		inject: func(e *env) {
			a := e.srv.admin()
			e.wg.Go(func() {
				for {
					select {
					case <-e.done:
						return
					case <-time.After(5 * time.Millisecond):
					}
					if err := a.ScriptFlush(context.Background()).Err(); err != nil {
						e.t.Errorf("SCRIPT FLUSH: %v", err)
						return
					}
				}
			})
		},
		heal: func(e *env) { close(e.done); e.wg.Wait() }},
	{name: "oom", stores: redisStores, failing: true,
		inject: func(e *env) {
			a := e.srv.admin()
			if err := a.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
				e.t.Fatal(err)
			}
			if err := a.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
				e.t.Fatal(err)
			}
		},
		heal: func(e *env) {
			if err := e.srv.admin().ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
				e.t.Fatal(err)
			}
		}},
	{name: "cluster master", stores: redisStores, cluster: true, failing: true,
		inject: func(e *env) { e.victim.Kill() },
		// The master is back when it serves its slots again.
		heal: func(e *env) { e.victim.Start(); e.cl.waitNodeOK(e.t, e.victim) }},
}

var modes = []core.FailureMode{core.FailClosed, core.FailOpen, core.FailFallback}

// call is one decision as a worker saw it.
type call struct {
	start, end time.Time
	id         int
	failed     bool // the failure mode decided (declared outcome)
	fast       bool // the breaker refused it without a round trip
	unknown    bool // the store's error matched ErrOutcomeUnknown
	bad        string
}

// row is one cell of the matrix: a fault, a store, a failure mode.
type row struct {
	fault, store, mode       string
	calls, failed, fast, unk int
	maxLat, maxFast, fastP50 time.Duration
	admitted, consumed       int64
	counted                  bool
	recovery                 time.Duration
	opens                    int64
	problems                 []string
}

func TestFaultMatrix(t *testing.T) {
	var mu sync.Mutex
	var rows []row
	t.Run("cells", func(t *testing.T) {
		for _, f := range faults {
			for _, sk := range storeKinds {
				if !slices.Contains(f.stores, sk.name) {
					continue
				}
				t.Run(strings.ReplaceAll(f.name, " ", "_")+"/"+sk.name, func(t *testing.T) {
					t.Parallel()
					got := runCell(t, f, sk)
					for _, r := range got {
						for _, p := range r.problems {
							t.Errorf("%s × %s × %s: %s", r.fault, r.store, r.mode, p)
						}
					}
					mu.Lock()
					rows = append(rows, got...)
					mu.Unlock()
				})
			}
		}
	})
	t.Log(matrixTable(rows))
}

func runCell(t *testing.T, f fault, sk storeKind) []row {
	e := &env{t: t, done: make(chan struct{})}
	var addrs, direct []string
	ids := []string{"u0", "u1"}
	if f.cluster {
		e.cl = startCluster(t)
		addrs, direct = e.cl.addrs(), e.cl.addrs()
		ids = []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	} else {
		if sk.name == "memcache" {
			e.srv = startMemcached(t)
		} else {
			e.srv = startRedis(t)
		}
		e.px = newProxy(t, e.srv.Addr)
		addrs, direct = []string{e.px.Addr}, []string{e.srv.Addr}
	}
	var opens atomic.Int64
	raw := sk.open(t, addrs, f.cluster)
	br := guard.NewBreaker(raw, &guard.BreakerOptions{
		OnStateChange: func(_ string, _, to guard.State) {
			if to == guard.Open {
				opens.Add(1)
			}
		},
	})
	if f.cluster {
		probe := newMatrixLimiter(t, br.Store(), core.FailClosed, nil)
		e.victim = e.cl.owner(t, probe.Key(ids[0]).String())
	}

	type worker struct {
		mode  core.FailureMode
		l     *core.Limiter
		ev    core.Event
		calls []call
	}
	var ws []*worker
	lastFail := make([]atomic.Int64, len(modes)) // unix nanos of the end of the last failed call
	for _, m := range modes {
		for range workers {
			w := &worker{mode: m}
			w.l = newMatrixLimiter(t, br.Store(), m, func(ev core.Event) { w.ev = ev })
			ws = append(ws, w)
		}
	}
	ctx := context.Background()
	warmUp(t, raw, workers*len(modes))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for wi, w := range ws {
		mi := slices.Index(modes, w.mode)
		wg.Go(func() {
			for i := wi; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := i % len(ids)
				w.ev = core.Event{}
				start := time.Now()
				d, err := w.l.Allow(ctx, ids[id])
				c := call{start: start, end: time.Now(), id: id}
				classify(&c, w.mode, d, err, w.ev)
				if c.failed || c.bad != "" {
					lastFail[mi].Store(c.end.UnixNano())
				}
				w.calls = append(w.calls, c)
				time.Sleep(pace)
			}
		})
	}
	time.Sleep(healthyPhase)
	injectAt := time.Now()
	f.inject(e)
	down := f.down
	if down == 0 {
		down = faultPhase
	}
	time.Sleep(down)
	f.heal(e)
	healAt := time.Now()
	for time.Since(healAt) < tailBound {
		time.Sleep(20 * time.Millisecond)
		quiet := true
		for i := range lastFail {
			if time.Since(time.Unix(0, lastFail[i].Load())) < settled {
				quiet = false
			}
		}
		if quiet && time.Since(healAt) > settled {
			break
		}
	}
	close(stop)
	wg.Wait()
	if f.cluster {
		e.cl.waitOK(t)
	}
	// Requests sent before the fault ended (held in the proxy, or in a
	// stalled connection) may still reach the server: let them land.
	time.Sleep(300 * time.Millisecond)

	reader := sk.open(t, direct, f.cluster)
	keeps := !(sk.name == "memcache" && f.memcacheLoses)
	var rows []row
	for _, m := range modes {
		r := row{fault: f.name, store: sk.name, mode: m.String(), counted: keeps, opens: opens.Load()}
		admitted := make([]int64, len(ids))
		unknown := make([]int64, len(ids))
		var lastFailEnd time.Time
		var okAfter int
		var fastLats []time.Duration
		for _, w := range ws {
			if w.mode != m {
				continue
			}
			for _, c := range w.calls {
				r.calls++
				lat := c.end.Sub(c.start)
				r.maxLat = max(r.maxLat, lat)
				if lat > callTimeout+slack {
					r.problems = append(r.problems, fmt.Sprintf("a call took %v, more than Timeout %v + %v", lat, callTimeout, slack))
				}
				if c.bad != "" {
					r.problems = append(r.problems, c.bad)
				}
				if c.unknown {
					r.unk++
					unknown[c.id]++
				}
				switch {
				case c.failed:
					r.failed++
					if c.end.Before(injectAt) {
						r.problems = append(r.problems, "a call failed before the fault")
					}
					if c.fast {
						r.fast++
						r.maxFast = max(r.maxFast, lat)
						fastLats = append(fastLats, lat)
						if lat > fastBound {
							r.problems = append(r.problems, fmt.Sprintf("a call the open breaker refused took %v, more than %v", lat, fastBound))
						}
					}
					if c.end.After(lastFailEnd) {
						lastFailEnd = c.end
					}
				case c.bad == "":
					admitted[c.id]++
					if c.start.After(healAt) {
						okAfter++
					}
				}
			}
		}
		if len(fastLats) > 0 {
			slices.Sort(fastLats)
			r.fastP50 = fastLats[len(fastLats)/2]
		}
		if f.failing && r.failed == 0 {
			r.problems = append(r.problems, "no call failed: the fault did not bite")
		}
		if !f.failing && r.failed > 0 {
			r.problems = append(r.problems, fmt.Sprintf("%d calls failed; none should", r.failed))
		}
		if lastFailEnd.After(healAt) {
			r.recovery = lastFailEnd.Sub(healAt)
		}
		if r.recovery > recoveryBound {
			r.problems = append(r.problems, fmt.Sprintf("calls still failed %v after the fault ended, more than %v", r.recovery, recoveryBound))
		}
		if okAfter == 0 {
			r.problems = append(r.problems, "no decision of the store after the fault ended")
		}
		if keeps {
			rl := newMatrixLimiter(t, reader, m, nil) // the same keys, straight to the server
			for i, id := range ids {
				d, err := rl.Allow(ctx, id)
				if err != nil || !d.Allowed {
					r.problems = append(r.problems, fmt.Sprintf("reading %s back: %+v, %v", id, d, err))
					continue
				}
				consumed := matrixPolicy.Limit - d.Remaining - 1
				r.admitted += admitted[i]
				r.consumed += consumed
				if consumed < admitted[i] || consumed > admitted[i]+unknown[i] {
					r.problems = append(r.problems, fmt.Sprintf("%s: %d admitted, %d with unknown outcome, but the server counted %d", id, admitted[i], unknown[i], consumed))
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// classify records what the decision of a call in mode m was, against
// what the mode declares: the store's decision (an admission: the policy
// refuses nothing), or the failure mode's: an error matching ErrUnavailable
// (closed), a degraded admission (open), a degraded decision of the
// fallback (fallback).
func classify(c *call, m core.FailureMode, d core.Decision, err error, ev core.Event) {
	storeErr := err
	if err == nil && d.Degraded {
		storeErr = ev.Err
	}
	switch {
	case err == nil && !d.Degraded:
		if !d.Allowed {
			c.bad = fmt.Sprintf("the store refused %+v under a policy that refuses nothing", d)
		}
		return
	case m == core.FailClosed && err != nil && errors.Is(err, core.ErrUnavailable):
	case m == core.FailOpen && err == nil && d.Degraded && d.Allowed:
	case m == core.FailFallback && err == nil && d.Degraded:
	default:
		c.bad = fmt.Sprintf("%v: got %+v, %v, not the declared outcome", m, d, err)
		return
	}
	c.failed = true
	c.fast = errors.Is(storeErr, guard.ErrOpen)
	c.unknown = errors.Is(storeErr, core.ErrOutcomeUnknown)
}

// warmUp makes n callers' worth of the store's connections before the
// healthy phase counts failures: a client dials on first use, and on a
// loaded machine go-redis's handshake (HELLO, CLIENT SETINFO) and a
// cluster's slot map can outlast the 100 ms Timeout, which the README
// documents. The calls go on keys of their own, around the breaker, until
// each caller has had an answer from every node (30 keys) or 5 s passed.
func warmUp(t testing.TB, s store.Store, n int) {
	t.Helper()
	l, err := core.New(core.Config{Policy: core.Policy{Name: "warm-up", Limit: 1_000_000, Window: time.Minute}, Algorithm: algorithm.FixedWindow{}, Store: s, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := 0; i < 30 && time.Now().Before(deadline); {
				if _, err := l.Allow(context.Background(), fmt.Sprint("w", i)); err == nil {
					i++
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

func newMatrixLimiter(t testing.TB, s store.Store, m core.FailureMode, observe func(core.Event)) *core.Limiter {
	t.Helper()
	p := matrixPolicy
	p.Name = "matrix-" + m.String()
	cfg := core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: s, Failure: m, Timeout: callTimeout, Observer: observe}
	if m == core.FailFallback {
		mem := memory.New(nil)
		t.Cleanup(func() { _ = mem.Close() })
		fb, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: mem})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Fallback = fb
	}
	l, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func matrixTable(rows []row) string {
	slices.SortFunc(rows, func(a, b row) int {
		fa := slices.IndexFunc(faults, func(f fault) bool { return f.name == a.fault })
		fb := slices.IndexFunc(faults, func(f fault) bool { return f.name == b.fault })
		if fa != fb {
			return fa - fb
		}
		if c := strings.Compare(a.store, b.store); c != 0 {
			return c
		}
		return strings.Compare(a.mode, b.mode)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "\nfault matrix: Timeout %v; every call ≤ Timeout+%v, refused by the open breaker ≤ %v, recovery ≤ %v\n", callTimeout, slack, fastBound, recoveryBound)
	fmt.Fprintf(&b, "%-14s %-8s %-11s %6s %6s %6s %6s %9s %9s %10s %7s %22s %9s %s\n",
		"fault", "store", "mode", "calls", "failed", "fast", "unknwn", "max ms", "fast ms", "fast p50µs", "opens", "admitted≤consumed≤+unk", "recov ms", "result")
	for _, r := range rows {
		counts := "state lost"
		if r.counted {
			counts = fmt.Sprintf("%d≤%d≤%d", r.admitted, r.consumed, r.admitted+int64(r.unk))
		}
		result := "ok"
		if len(r.problems) > 0 {
			result = "FAIL"
		}
		fmt.Fprintf(&b, "%-14s %-8s %-11s %6d %6d %6d %6d %9.1f %9.2f %10.0f %7d %22s %9.0f %s\n",
			r.fault, r.store, r.mode, r.calls, r.failed, r.fast, r.unk, ms(r.maxLat), ms(r.maxFast), float64(r.fastP50)/float64(time.Microsecond), r.opens, counts, ms(r.recovery), result)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
