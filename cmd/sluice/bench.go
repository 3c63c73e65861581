package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

const benchSynopsis = `Measures a store: decisions per second and latency percentiles (p50, p99,
p99.9) for one algorithm, with a chosen number of concurrent callers spread over
a chosen number of keys. Every caller is one goroutine on one of --instances
Limiters, each with its own store client (a fleet in one process). The policy
admits a million a second by default (the most a 1s window allows), so that
every decision on a network store writes; the memory store decides faster,
and part of its decisions are then denials (a longer --window raises the
rate). --limit lowers it to measure denials too. For the speed of the library itself, the Go
benchmarks (make bench) are the reference; this measures a deployment.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", benchSynopsis, stdout)
	store := fs.String("store", "", "store (required): memory, embedded, redis://…, valkey://…, memcache://…")
	algName := fs.String("algorithm", "gcra", "algorithm to measure")
	conc := fs.Int("concurrency", 64, "concurrent callers")
	keys := fs.Int("keys", 1, "callers spread over this many keys (1: one hot key)")
	instances := fs.Int("instances", 2, "Limiters, each with its own store client")
	duration := fs.Duration("duration", 5*time.Second, "how long to run")
	limit := fs.Int64("limit", 0, "policy limit per --window (default 1000000, so almost every call is admitted; for the sliding log, its most, 10000; for concurrency, --concurrency)")
	window := fs.Duration("window", time.Second, "policy window")
	progress := fs.String("progress", "auto", "progress bar: auto (on a terminal, runs over 2s), on, off")
	metrics := metricsFlag(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	switch {
	case *store == "":
		return usagef("--store is required")
	case *conc < 1 || *conc > 10_000:
		return usagef("--concurrency must be 1 to 10000")
	case *keys < 1 || *keys > 10_000_000:
		return usagef("--keys must be 1 to 10000000")
	case *instances < 1 || *instances > 64:
		return usagef("--instances must be 1 to 64")
	case *duration <= 0 || *duration > time.Hour:
		return usagef("--duration must be positive and at most 1h")
	case *progress != "auto" && *progress != "on" && *progress != "off":
		return usagef("--progress must be auto, on or off")
	}
	algs, err := parseAlgorithms(*algName)
	if err != nil {
		return err
	}
	if *algName == "" || len(algs) != 1 {
		return usagef("--algorithm must name exactly one algorithm")
	}
	alg := algs[0]
	limitSet := given(fs, "limit")
	if limitSet && *limit <= 0 {
		return usagef("--limit must be positive, got %d", *limit)
	}
	if !limitSet {
		// The concurrency limit keeps one entry per lease and caps its
		// Limit; each caller holds at most one lease at a time.
		*limit = 1_000_000
		if _, ok := alg.(algorithm.SlidingLog); ok {
			*limit = algorithm.SlidingLogMaxLimit // a member per unit: its Limit is capped
		}
		if _, ok := alg.(core.Leaser); ok {
			*limit = int64(*conc)
		}
	}
	p := core.Policy{Name: "bench", Limit: *limit, Window: *window}
	if err := p.Validate(); err != nil {
		return usageError{msg: err.Error()}
	}
	b, err := openBackend(ctx, *store)
	if err != nil {
		return err
	}
	// The backend and the instances' stores close at once: a store whose
	// server stopped answering may take a second or two to close
	// (valkey-go's Close), and one after another that was many seconds
	// past --duration.
	closers := []func(){b.Close}
	defer func() { closeAll(closers) }()
	ms, err := startMetrics(*metrics, stdout)
	if err != nil {
		return err
	}
	defer ms.stop()
	prefix := "sluice-bench-" + randomHex(4)
	var limiters []*core.Limiter
	for range *instances {
		s, closeStore, err := b.NewStore()
		if err != nil {
			return err
		}
		closers = append(closers, closeStore)
		l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, Prefix: prefix, Observer: ms.observer()})
		if err != nil {
			return usageError{msg: err.Error()}
		}
		limiters = append(limiters, l)
	}
	if err := warmUp(ctx, limiters, alg); err != nil {
		return err
	}
	identities := make([]string, *keys)
	for i := range identities {
		identities[i] = "client-" + strconv.Itoa(i)
	}
	fmt.Fprintf(stdout, "bench %s on %s: %s, %s, %s, %s, policy %s\n",
		alg.Name(), b.Name, count(*conc, "caller"), count(*keys, "key"), count(*instances, "instance"), *duration, p)

	showBar := *progress == "on" || *progress == "auto" && *duration > 2*time.Second && isTerminal(os.Stderr)
	var bar *progressbar.ProgressBar
	if showBar {
		bar = progressbar.NewOptions64(int64(*duration/(100*time.Millisecond)),
			progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("benchmarking"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	r := benchRun(ctx, limiters, identities, *conc, *duration, alg, func(elapsed time.Duration) {
		if bar != nil {
			_ = bar.Set64(int64(elapsed / (100 * time.Millisecond)))
		}
	})
	if bar != nil {
		_ = bar.Finish()
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	decided := r.total - r.errors
	fmt.Fprintf(stdout, "\ndecisions   %d in %s: %.0f decisions/s\n", decided, round(r.elapsed), float64(decided)/r.elapsed.Seconds())
	fmt.Fprintf(stdout, "admitted    %d, denied %d, errors %d\n", r.admitted, decided-r.admitted, r.errors)
	fmt.Fprintf(stdout, "latency     p50 %s  p99 %s  p99.9 %s  max %s (of decisions)\n",
		round(r.hist.quantile(0.5)), round(r.hist.quantile(0.99)), round(r.hist.quantile(0.999)), round(r.hist.max))
	if cpus := runtime.GOMAXPROCS(0); *conc > cpus {
		// A caller preempted mid-decision waits its turn behind the
		// others: with an in-process store, that wait is most of the max.
		fmt.Fprintf(stdout, "            (%d callers on %d CPUs: a latency includes the time its caller waited for a CPU)\n", *conc, cpus)
	}
	if r.firstErr != nil {
		fmt.Fprintf(stdout, "first error %v\n", r.firstErr)
	}
	return r.verdict()
}

// verdict fails a run in which any call failed: its rate and latencies
// would not be the store's.
func (r benchResult) verdict() error {
	if r.errors > 0 {
		return errFailed
	}
	return nil
}

type benchResult struct {
	total, admitted, errors int64 // total counts calls: decisions and errors
	elapsed                 time.Duration
	hist                    *histogram
	firstErr                error
}

// benchRun keeps conc callers busy for d and merges their histograms. The
// run's end stops callers from starting a call; calls under way finish
// under their own deadline, so the end of the run is not counted as errors.
func benchRun(ctx context.Context, ls []*core.Limiter, ids []string, conc int, d time.Duration, alg core.Algorithm, tick func(time.Duration)) benchResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	call := context.WithoutCancel(ctx)
	_, leaser := alg.(core.Leaser)
	var res benchResult
	res.hist = newHistogram()
	var mu sync.Mutex
	var admitted, errs atomic.Int64
	var firstErr atomic.Pointer[error]
	start := time.Now()
	var wg sync.WaitGroup
	for g := range conc {
		wg.Go(func() {
			h := newHistogram()
			l := ls[g%len(ls)]
			for i := g; ctx.Err() == nil; i += conc {
				id := ids[i%len(ids)]
				t0 := time.Now()
				var dec core.Decision
				var err error
				if leaser {
					var lease *core.Lease
					lease, dec, err = l.Acquire(call, id)
					if lease != nil {
						_ = lease.Release(call)
					}
				} else {
					dec, err = l.Allow(call, id)
				}
				took := time.Since(t0)
				switch {
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue // an error is no decision: not in the latencies
				case dec.Allowed:
					admitted.Add(1)
				}
				h.add(took)
			}
			mu.Lock()
			res.hist.merge(h)
			mu.Unlock()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-t.C:
			tick(time.Since(start))
		}
	}
	res.elapsed = time.Since(start)
	res.admitted, res.errors = admitted.Load(), errs.Load()
	res.total = res.hist.count + res.errors
	if e := firstErr.Load(); e != nil {
		res.firstErr = *e
	}
	return res
}

// histogram records latencies in log-linear buckets: every µs below
// 2·histSub µs, then histSub buckets per power of two (within 1/histSub,
// 1.6%, of the value), up to histMax (longer counts as histMax). About
// 10 KB a caller, so that the most callers bench takes, 10,000, hold 100 MB
// of them (a µs-exact table took 880 KB a caller, 8 GB in all).
type histogram struct {
	counts [histBuckets]int64
	count  int64
	max    time.Duration
}

const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histMaxBits = 24
	histMax     = 1<<histMaxBits - 1 // µs: 16.8 s
	// histBuckets is bucketOf(histMax) + 1: 2·histSub exact ones, then
	// histSub for each power of two up to histMax's.
	histBuckets = (histMaxBits - histSubBits + 1) * histSub
)

// bucketOf is the bucket of a latency of us µs (0 <= us <= histMax).
func bucketOf(us int64) int {
	if us < 2*histSub {
		return int(us)
	}
	shift := bits.Len64(uint64(us)) - histSubBits - 1 // us>>shift in [histSub, 2·histSub)
	return 2*histSub + (shift-1)*histSub + int(us>>shift) - histSub
}

// upperEdge is the first µs past bucket i.
func upperEdge(i int) int64 {
	if i < 2*histSub {
		return int64(i) + 1
	}
	j := i - 2*histSub
	shift := j/histSub + 1
	return int64(j%histSub+histSub+1) << shift
}

func newHistogram() *histogram { return &histogram{} }

func (h *histogram) add(d time.Duration) {
	h.count++
	h.max = max(h.max, d)
	h.counts[bucketOf(min(max(d.Microseconds(), 0), histMax))]++
}

func (h *histogram) merge(o *histogram) {
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.count += o.count
	h.max = max(h.max, o.max)
}

// quantile returns the upper edge of the bucket holding quantile q (the
// max, when that is sooner).
func (h *histogram) quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := int64(q*float64(h.count-1)) + 1
	var seen int64
	for i, n := range h.counts[:histBuckets-1] {
		if seen += n; seen >= rank {
			return min(time.Duration(upperEdge(i))*time.Microsecond, h.max)
		}
	}
	return h.max // the last bucket holds every latency from histMax on
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// warmUp makes one decision through each limiter before the clock starts,
// within dialTimeout, so that the run measures decisions, not a client's
// first dials and a cluster client's first read of the slot map (64
// callers on a cold cluster client spend their whole deadline waiting for
// it). It decides for an identity of its own, reset afterwards.
func warmUp(ctx context.Context, limiters []*core.Limiter, alg core.Algorithm) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	const id = "warm-up"
	for _, l := range limiters {
		var err error
		if _, ok := alg.(core.Leaser); ok {
			var lease *core.Lease
			if lease, _, err = l.Acquire(ctx, id); lease != nil {
				_ = lease.Release(ctx)
			}
		} else {
			_, err = l.Allow(ctx, id)
		}
		switch {
		case err != nil && (ctx.Err() != nil || store.IsContextError(err)):
			return unreachableError{fmt.Errorf("a first decision did not finish within %s: %w", dialTimeout, err)}
		case err != nil:
			// It answered, refusing (a replica's READONLY, an OOM, an
			// ACL): the job fails, the store is reachable.
			return fmt.Errorf("a first decision failed: %w", err)
		}
		_ = l.Reset(ctx, id)
	}
	return nil
}

// closeAll calls every close at once and returns when all have returned.
func closeAll(closes []func()) {
	var wg sync.WaitGroup
	for _, c := range closes {
		wg.Go(c)
	}
	wg.Wait()
}
