package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v5"

	secho "github.com/sluicehq/sluice/adapters/echo"
	sgin "github.com/sluicehq/sluice/adapters/gin"
	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

const demoSynopsis = `Shows one limit held across a fleet. Part one: for each algorithm, 200
concurrent checks for one client, spread over two Limiters with their own store
clients, against a limit of 25 per 2 s. Part two: three HTTP instances on
loopback — net/http, gin and echo — each with its own store client, take 200
concurrent requests from one client between them. Then it waits out the window
and shows that admission resumes. Part three: a tier table (free, pro,
enterprise), one multi-limit decision per request under the tenant's plan, and
a free tenant refused by its daily limit until midnight.

The default store is an embedded Redis (miniredis), so the Lua path runs with
no server installed.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", demoSynopsis, stdout)
	spec := fs.String("store", "embedded", "store: embedded, memory, redis://…, valkey://…, memcache://…")
	requests := fs.Int("requests", 200, "concurrent requests in each burst")
	limit := fs.Int64("limit", 25, "units per window (at least 3: every algorithm is to admit a whole limit again a window after a burst)")
	window := fs.Duration("window", 2*time.Second, "window length")
	httpAlg := fs.String("http-algorithm", "sliding-log", "rate algorithm of the HTTP instances: "+strings.Join(rateAlgorithmNames(), ", "))
	metrics := metricsFlag(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if *requests < 1 || *requests > 10_000 {
		return usagef("--requests must be 1 to 10000")
	}
	p := core.Policy{Name: "demo", Limit: *limit, Window: *window}
	if err := p.Validate(); err != nil {
		return usageError{msg: err.Error()}
	}
	if *limit < 3 {
		// Its checks expect every algorithm to admit a whole limit again
		// a window after a burst: under 1 or 2 the sliding counter's
		// weighted last window refuses that, as it should, and the demo
		// would report a failure that is not one.
		return usagef("--limit must be at least 3 for the demo's checks (every algorithm admits a whole limit again a window after a burst)")
	}
	if *window > time.Minute {
		return usagef("--window above 1m would keep the demo waiting")
	}
	if *window < 10*time.Millisecond {
		return usagef("--window below 10ms ends within a burst of concurrent requests: its counts would show the machine, not the algorithms")
	}
	alg, err := algorithm.ByName(*httpAlg)
	if _, leaser := alg.(core.Leaser); err != nil || leaser {
		return usagef("--http-algorithm %q: want a rate algorithm (%s)", *httpAlg, strings.Join(rateAlgorithmNames(), ", "))
	}
	b, err := openBackend(ctx, *spec)
	if err != nil {
		return err
	}
	defer b.Close()
	ms, err := startMetrics(*metrics, stdout)
	if err != nil {
		return err
	}
	defer ms.stop()
	d := &demo{b: b, p: p, requests: *requests, prefix: "sluice-demo-" + randomHex(4), out: stdout, observer: ms.observer()}
	return d.run(ctx, *spec, alg)
}

// run runs the demo's three parts against the store of spec and gives the
// verdict. A part in which the store failed a decision ends the demo: no
// count after it would be the algorithms'.
func (d *demo) run(ctx context.Context, spec string, alg core.Algorithm) error {
	fmt.Fprintf(d.out, "store: %s\npolicy: %s\n\n", d.b.Name, d.p)
	ok, err := d.algorithms(ctx)
	if err := d.verdictOnStore(ctx, spec, err); err != nil {
		return err
	}
	fmt.Fprintln(d.out)
	httpOK, resume, err := d.http(ctx, alg)
	if err := d.verdictOnStore(ctx, spec, err); err != nil {
		return err
	}
	fmt.Fprintln(d.out)
	tiersOK, err := d.tiers(ctx)
	if err := d.verdictOnStore(ctx, spec, err); err != nil {
		return err
	}
	if !ok || !httpOK || !resume || !tiersOK {
		fmt.Fprintln(d.out, "\nFAIL: a count was not what the algorithm promises (see above)")
		return errFailed
	}
	fmt.Fprintln(d.out, "\nOK: every algorithm kept its promise, the fleet admitted exactly the limit, and admission resumed after the window.")
	return nil
}

// verdictOnStore ends the demo after a part that returned err or in which
// the store failed a decision, and returns nil to go on. A store that no
// longer answers is unreachable (exit 3), as for conformance; one that
// answers refused the decisions (a replica's READONLY, an ACL's NOPERM),
// and the demo failed (exit 1). Either way no algorithm is blamed: the
// counts were not its to make, unless one admitted too many.
func (d *demo) verdictOnStore(ctx context.Context, spec string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // interrupted: its store errors are the interrupt's
	}
	storeErr := d.storeFailure()
	if storeErr == nil || d.overAdmitted {
		return err // too many admitted is the algorithms' failure, store or not
	}
	b, gone := askAgain(ctx, spec)
	if b != nil {
		b.Close()
	}
	if gone != nil {
		return unreachableError{fmt.Errorf("the store stopped answering during the demo, so its counts say nothing of the algorithms: %w", storeErr)}
	}
	return fmt.Errorf("the store failed the demo's decisions, so its counts say nothing of the algorithms: %w", storeErr)
}

type demo struct {
	b        *backend
	p        core.Policy
	requests int
	prefix   string
	out      io.Writer
	closers  []func()
	observer func(core.Event) // --metrics, or nil

	mu           sync.Mutex
	storeErr     error // the first decision the store failed
	overAdmitted bool  // a count above its bound: the algorithms failed
}

// observe hears every decision of the demo's Limiters: it notes a store
// error, then passes the event on to --metrics.
func (d *demo) observe(e core.Event) {
	d.noteStoreError(e.Err)
	if d.observer != nil {
		d.observer(e)
	}
}

// noteStoreError keeps the first error that says the store could not
// decide. Errors of the demo's own making are no store's.
func (d *demo) noteStoreError(err error) {
	if !errors.Is(err, store.ErrUnavailable) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.storeErr == nil {
		d.storeErr = err
	}
}

// storeFailure is the first decision the store failed, or nil.
func (d *demo) storeFailure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.storeErr
}

// limiter returns a Limiter with a store client of its own: one instance of
// the fleet.
func (d *demo) limiter(alg core.Algorithm) (*core.Limiter, error) {
	s, closeStore, err := d.b.NewStore()
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, closeStore)
	return core.New(core.Config{Policy: d.p, Algorithm: alg, Store: s, Prefix: d.prefix + ":" + alg.Name(), Timeout: 5 * time.Second, Observer: d.observe})
}

func (d *demo) close() {
	for _, c := range d.closers {
		c()
	}
}

type burst struct {
	alg        core.Algorithm
	admitted   int64
	delayed    int64         // admitted with a Delay: queued (leaky bucket)
	maxDelay   time.Duration // the longest of those delays
	errors     int64
	denied     core.Decision
	limiters   []*core.Limiter
	leases     []*core.Lease
	start, end time.Time
	mu         sync.Mutex
	firstErr   error
}

// bound is what the algorithm promises for this burst, which took real
// time: exactly the quota when nothing can refill or roll over during it,
// else at least the quota and at most the algorithm's stated bound.
func (bu *burst) bound(p core.Policy, quota int64, requests int) (lo, hi int64, why string) {
	lo, hi, why = bu.bounds(p, quota)
	// A burst of fewer requests than the quota admits every one.
	return min(lo, int64(requests)), min(hi, int64(requests)), why
}

func (bu *burst) bounds(p core.Policy, quota int64) (lo, hi int64, why string) {
	d := bu.end.Sub(bu.start).Microseconds()
	t := p.IntervalMicros()
	w := p.WindowMicros()
	windows := bu.end.UnixMicro()/w - bu.start.UnixMicro()/w + 1 // aligned windows the burst touched
	straddles := windows > 1
	switch bu.alg.(type) {
	case algorithm.TokenBucket, algorithm.GCRA:
		// Burst + ⌊d/T⌋: the burst itself took d, and tokens came back.
		if extra := d / t; extra > 0 {
			return quota, quota + extra, fmt.Sprintf("exact up to refill: %d + ⌊%s / %s⌋", quota, round(bu.end.Sub(bu.start)), round(core.Micros(t)))
		}
	case algorithm.LeakyBucket:
		// B + ⌊(d+M)/T⌋, which is Quota (B + ⌊M/T⌋) plus ⌊d/T⌋ or one
		// more: M mod T and d together may make a whole interval.
		return quota, p.Capacity() + (d+p.MaxDelayMicros())/t, fmt.Sprintf("%d at once, %d queued (started up to %s late): delayed, not over-admitted",
			bu.admitted-bu.delayed, bu.delayed, round(bu.maxDelay))
	case algorithm.FixedWindow, algorithm.SlidingCounter:
		if straddles {
			return quota, windows * quota, fmt.Sprintf("the burst touched %d aligned windows: up to the limit in each", windows)
		}
	case algorithm.SlidingLog:
		if d >= w {
			return quota, (d/w + 1) * quota, "the burst outlasted the window: the limit in every trailing window"
		}
	case algorithm.Concurrency:
		if ttl := p.LeaseTTLMicros(); d >= ttl {
			return quota, (d/ttl + 1) * quota, "the burst outlasted LeaseTTL: leases reclaimed, then taken again"
		}
		return quota, quota, "in flight at once, released after the burst"
	}
	return quota, quota, "exact"
}

// algorithms runs part one: every algorithm, one burst each; then one wait
// for the window; then one more request each.
func (d *demo) algorithms(ctx context.Context) (bool, error) {
	defer d.close()
	fmt.Fprintf(d.out, "Part 1: %d concurrent checks for one client on each algorithm, over two Limiters\n\n", d.requests)
	var bursts []*burst
	for _, alg := range algorithm.All() {
		bu := &burst{alg: alg}
		for range 2 {
			l, err := d.limiter(alg)
			if err != nil {
				return false, err
			}
			bu.limiters = append(bu.limiters, l)
		}
		bursts = append(bursts, bu)
	}
	// One algorithm at a time: a burst of 200 is the test, 1400 at once
	// would only measure the store's queue.
	start := time.Now()
	for _, bu := range bursts {
		var wg sync.WaitGroup
		bu.start = time.Now()
		for i := range d.requests {
			l := bu.limiters[i%2]
			wg.Go(func() {
				var dec core.Decision
				var err error
				if _, ok := bu.alg.(core.Leaser); ok {
					var lease *core.Lease
					lease, dec, err = l.Acquire(ctx, "client-1")
					if lease != nil {
						bu.mu.Lock()
						bu.leases = append(bu.leases, lease)
						bu.mu.Unlock()
					}
				} else {
					dec, err = l.Allow(ctx, "client-1")
				}
				bu.mu.Lock()
				defer bu.mu.Unlock()
				switch {
				case err != nil:
					bu.errors++
					if bu.firstErr == nil {
						bu.firstErr = err
					}
				case dec.Allowed:
					bu.admitted++
					if dec.Delay > 0 {
						bu.delayed++
						bu.maxDelay = max(bu.maxDelay, dec.Delay)
					}
				case bu.denied.Limit == 0:
					bu.denied = dec
				}
			})
		}
		wg.Wait()
		bu.end = time.Now()
	}
	elapsed := time.Since(start)
	last := time.Now()
	// The concurrency limit's requests finish now: their leases go back.
	for _, bu := range bursts {
		for _, ls := range bu.leases {
			_ = ls.Release(ctx)
		}
	}
	ok := true
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "algorithm\tadmitted\tlimit\tRetry-After\twait\tpromise")
	for _, bu := range bursts {
		quota := bu.limiters[0].Quota()
		lo, hi, note := bu.bound(d.p, quota, d.requests)
		switch {
		case bu.admitted > hi:
			// Too many is the algorithm's, whatever else failed.
			ok = false
			d.overAdmitted = true
			note = fmt.Sprintf("WRONG: want %d..%d (%s); %d errors, first: %v", lo, hi, note, bu.errors, bu.firstErr)
		case errors.Is(bu.firstErr, store.ErrUnavailable):
			// The store's failure, not the algorithm's count.
			ok = false
			note = fmt.Sprintf("the store failed %d of %d checks, first: %v", bu.errors, d.requests, bu.firstErr)
		case bu.errors > 0 || bu.admitted < lo:
			ok = false
			note = fmt.Sprintf("WRONG: want %d..%d (%s); %d errors, first: %v", lo, hi, note, bu.errors, bu.firstErr)
		}
		ra, wait := retryAfter(bu.denied)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", bu.alg.Name(), bu.admitted, quota, ra, wait, note)
	}
	tw.Flush()
	fmt.Fprintf(d.out, "(%d checks in %s)\n", d.requests*len(bursts), round(elapsed))
	fmt.Fprintln(d.out, "Retry-After: what a 429 carries for the first denial (whole seconds, rounded up, as in part 2); wait: the exact time.")

	// The window, or a refusal's longer wait: the sliding counter's, after
	// a burst late in a window, runs past the next one's start by its
	// weighted count.
	wait := d.p.Window
	for _, bu := range bursts {
		wait = max(wait, bu.denied.RetryAfter)
	}
	wait += 50*time.Millisecond - time.Since(last)
	fmt.Fprintf(d.out, "\nwaiting %s for the window and every Retry-After to pass…\n", round(wait))
	if err := sleepCtx(ctx, wait); err != nil {
		return false, err
	}
	var resumed []string
	for _, bu := range bursts {
		var dec core.Decision
		var err error
		if _, isLeaser := bu.alg.(core.Leaser); isLeaser {
			var lease *core.Lease
			lease, dec, err = bu.limiters[0].Acquire(ctx, "client-1")
			_ = lease.Release(ctx)
		} else {
			dec, err = bu.limiters[1].Allow(ctx, "client-1")
		}
		switch {
		case errors.Is(err, store.ErrUnavailable):
			ok = false
			resumed = append(resumed, fmt.Sprintf("%s: no decision, the store failed: %v", bu.alg.Name(), err))
			continue
		case err != nil || !dec.Allowed:
			ok = false
			resumed = append(resumed, fmt.Sprintf("%s: NOT admitted (%v)", bu.alg.Name(), err))
			continue
		}
		resumed = append(resumed, bu.alg.Name()+": admitted")
	}
	fmt.Fprintln(d.out, "after the window:")
	for _, r := range resumed {
		fmt.Fprintln(d.out, "  "+r)
	}
	return ok, nil
}

// retryAfter is a denial's Retry-After as the HTTP adapters write it (whole
// seconds, rounded up, at least 1), as part two prints it from a 429, and
// its exact wait; "-" for a burst that had no denial.
func retryAfter(dec core.Decision) (header, wait string) {
	if dec.Limit == 0 {
		return "-", "-"
	}
	secs := max(int64((dec.RetryAfter+time.Second-1)/time.Second), 1)
	return strconv.FormatInt(secs, 10), round(dec.RetryAfter).String()
}

// instance is one HTTP server of the fleet.
type instance struct {
	name     string
	url      string
	admitted atomic.Int64
	denied   atomic.Int64
	srv      *http.Server
}

// http runs part two: three HTTP instances, one burst, the headers of a
// 429, and a request after its Retry-After.
func (d *demo) http(ctx context.Context, alg core.Algorithm) (ok, resumed bool, err error) {
	defer d.close()
	fmt.Fprintf(d.out, "Part 2: three HTTP instances (net/http, gin, echo), %s, each with its own store client\n\n", alg.Name())
	gin.SetMode(gin.ReleaseMode)
	var insts []*instance
	defer func() {
		for _, in := range insts {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = in.srv.Shutdown(sctx)
			cancel()
		}
	}()
	for _, name := range []string{"net/http", "gin", "echo"} {
		l, err := d.limiter(alg)
		if err != nil {
			return false, false, err
		}
		pol, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{{Limiter: l}}})
		if err != nil {
			return false, false, err
		}
		in := &instance{name: name}
		var h http.Handler
		switch name {
		case "net/http":
			h = nethttp.Middleware(pol)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				in.admitted.Add(1)
				_, _ = io.WriteString(w, "ok\n")
			}))
		case "gin":
			g := gin.New()
			g.Use(sgin.Middleware(pol))
			g.GET("/", func(c *gin.Context) { in.admitted.Add(1); c.String(http.StatusOK, "ok\n") })
			h = g
		case "echo":
			e := echo.New()
			e.Use(secho.Middleware(pol))
			e.GET("/", func(c *echo.Context) error { in.admitted.Add(1); return c.String(http.StatusOK, "ok\n") })
			h = e
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return false, false, err
		}
		in.url = "http://" + ln.Addr().String() + "/"
		in.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = in.srv.Serve(ln) }()
		insts = append(insts, in)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	start := time.Now()
	var sample http.Header
	var sampleAt time.Time
	var sampleMu sync.Mutex
	var failures, unavailable atomic.Int64
	var wg sync.WaitGroup
	for i := range d.requests {
		in := insts[i%len(insts)]
		wg.Go(func() {
			resp, err := get(ctx, client, in.url)
			if err != nil {
				failures.Add(1)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
			case http.StatusTooManyRequests:
				in.denied.Add(1)
				sampleMu.Lock()
				if sample == nil {
					sample, sampleAt = resp.Header, time.Now()
				}
				sampleMu.Unlock()
			case http.StatusServiceUnavailable:
				unavailable.Add(1) // the store could not decide
			default:
				failures.Add(1)
			}
		})
	}
	wg.Wait()
	var total int64
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "instance\tadmitted\t429")
	for _, in := range insts {
		total += in.admitted.Load()
		fmt.Fprintf(tw, "%s\t%d\t%d\n", in.name, in.admitted.Load(), in.denied.Load())
	}
	fmt.Fprintf(tw, "total\t%d\t(limit %d, %d requests)\n", total, d.p.Limit, d.requests)
	tw.Flush()
	// The algorithm's own bound for a burst that took this long, as in
	// part one: a bucket refills while the burst runs, and the leaky
	// bucket's queue is deeper than its burst.
	bu := &burst{alg: alg, start: start, end: time.Now()}
	lo, hi, why := bu.bound(d.p, alg.Quota(&d.p), d.requests)
	ok = total >= lo && total <= hi && failures.Load() == 0 && unavailable.Load() == 0
	// Requests the store could not decide were not admitted: too few is
	// then no count of the algorithm's.
	d.overAdmitted = d.overAdmitted || total > hi
	if total > hi || total < lo && unavailable.Load() == 0 {
		fmt.Fprintf(d.out, "WRONG: want %d..%d (%s)\n", lo, hi, why)
	}
	if unavailable.Load() > 0 {
		fmt.Fprintf(d.out, "%d requests were answered 503 Service Unavailable: the store could not decide\n", unavailable.Load())
	}
	if failures.Load() > 0 {
		fmt.Fprintf(d.out, "%d requests failed outright\n", failures.Load())
	}
	if sample != nil {
		fmt.Fprintln(d.out, "\na 429's headers:")
		for _, k := range []string{"Retry-After", "Ratelimit-Policy", "Ratelimit", "Content-Type"} {
			fmt.Fprintf(d.out, "  %s: %s\n", k, sample.Get(k))
		}
	}
	var ra time.Duration
	if sample != nil {
		var secs int
		if _, err := fmt.Sscan(sample.Get("Retry-After"), &secs); err == nil {
			ra = time.Duration(secs) * time.Second
		}
	}
	// Honest Retry-After: a request sent once it has passed, counted from
	// the 429 that carried it, is admitted. With no 429 (fewer requests
	// than the limit), until the burst has left the window: two windows
	// for the sliding counter, which weighs the last one.
	span := d.p.Window
	if _, ok := alg.(algorithm.SlidingCounter); ok {
		span *= 2
	}
	wait := span + 50*time.Millisecond - time.Since(start)
	what, after := "until the burst has left the window", "after the wait"
	if sample != nil {
		wait = ra - time.Since(sampleAt)
		what, after = "the 429's Retry-After, counted from when it arrived", "after Retry-After"
	}
	fmt.Fprintf(d.out, "\nwaiting %s (%s)…\n", round(max(wait, 0)), what)
	if err := sleepCtx(ctx, wait); err != nil {
		return ok, false, err
	}
	// Retry-After promises one request, not one per instance: an instance
	// whose request the one before it took the room of is refused again,
	// with a Retry-After of its own, which it honours in turn.
	resumed = true
	for _, in := range insts {
		resp, err := get(ctx, client, in.url)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			resp.Body.Close()
			at := time.Now()
			var secs int
			if _, err := fmt.Sscan(resp.Header.Get("Retry-After"), &secs); err != nil || secs < 1 {
				resumed = false
				fmt.Fprintf(d.out, "  %s: %s with Retry-After %q (want whole seconds)\n", in.name, resp.Status, resp.Header.Get("Retry-After"))
				continue
			}
			fmt.Fprintf(d.out, "  %s: %s (the room went to the request before), Retry-After: %d\n", in.name, resp.Status, secs)
			if err := sleepCtx(ctx, time.Duration(secs)*time.Second-time.Since(at)); err != nil {
				return ok, false, err
			}
			after = "after Retry-After"
			resp, err = get(ctx, client, in.url)
		}
		status := "error: " + fmt.Sprint(err)
		if err == nil {
			resp.Body.Close()
			status = resp.Status
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(d.out, "  %s %s: %s, RateLimit: %s\n", in.name, after, status, resp.Header.Get("Ratelimit"))
				continue
			}
		}
		resumed = false
		if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
			fmt.Fprintf(d.out, "  %s %s: %s: the store could not decide\n", in.name, after, status)
			continue
		}
		fmt.Fprintf(d.out, "  %s %s: %s (want 200)\n", in.name, after, status)
	}
	return ok, resumed, nil
}

func get(ctx context.Context, c *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// rateAlgorithmNames are the algorithms the demo's HTTP instances can run:
// every one but the concurrency limit.
func rateAlgorithmNames() []string {
	var names []string
	for _, a := range algorithm.All() {
		if _, leaser := a.(core.Leaser); !leaser {
			names = append(names, a.Name())
		}
	}
	return names
}
