package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/cmd/sluice/internal/simulate"
	"github.com/sluicehq/sluice/core"
)

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("simulate", "Replays a traffic pattern through every algorithm under a simulated clock\n"+
		"(memory store, injected time: an hour of traffic takes milliseconds), prints\n"+
		"admitted, rejected and the worst burst any trailing window saw, and writes a\n"+
		"PNG with one panel per algorithm. With --regions, splits one global limit\n"+
		"across three regions in each mode of package region instead. With --pool,\n"+
		"three tenants share a burst pool above a base rate each, and one spikes.\n\nPatterns:\n"+patternList(), stdout)
	pattern := fs.String("pattern", "boundary", "traffic `pattern`: "+patternNames())
	limit := fs.Int64("limit", 10, "units per window (with --regions: the global limit, 12 to 100000, default 100)")
	window := fs.Duration("window", time.Second, "window length")
	burst := fs.Int64("burst", 0, "bucket capacity (0: the limit)")
	duration := fs.Duration("duration", 10*time.Second, "simulated time")
	out := fs.String("out", "sluice-simulate.png", "PNG `file` to write (\"\" for none); with --pool the default is sluice-pool.png, with --regions sluice-regions.png")
	algs := fs.String("algorithms", "", "comma-separated algorithms (default: all seven)")
	seed := fs.Uint64("seed", 1, "random seed of the tenants and retry-storm patterns")
	regions := fs.Bool("regions", false, "split one global limit across three regions instead: the static, synced and slack modes side by side")
	syncPeriod := fs.Duration("sync-period", 0, "with --regions: how often the synced regions sync (default: a fifth of --window)")
	pool := fs.Bool("pool", false, "three tenants of different sizes instead, a base rate each and a shared burst pool: one spikes, two stay steady")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := modeFlags(fs, *pool, *regions); err != nil {
		return err
	}
	if *pool {
		return runSimulatePool(ctx, fs, *out, stdout)
	}
	if *regions {
		return runSimulateRegions(ctx, fs, *limit, *window, *duration, *syncPeriod, *out, stdout)
	}
	pat, err := simulate.PatternByName(*pattern)
	if err != nil {
		return usageError{msg: err.Error()}
	}
	if !pat.Seeded && given(fs, "seed") {
		var seeded []string
		for _, p := range simulate.Patterns {
			if p.Seeded {
				seeded = append(seeded, p.Name)
			}
		}
		return usagef("--seed is for the patterns %s: %s draws nothing at random", strings.Join(seeded, ", "), pat.Name)
	}
	p := core.Policy{Name: "simulate", Limit: *limit, Window: *window, Burst: *burst}
	if err := p.Validate(); err != nil {
		return usageError{msg: err.Error()}
	}
	if *duration <= 0 || *duration > 24*time.Hour || *duration/p.Window > 100_000 {
		return usagef("--duration must be positive, at most 24h and at most 100000 windows")
	}
	// Every pattern offers a few times the limit per window: bound the
	// requests simulated, so that no flag value can exhaust memory.
	if windows := int64(*duration/p.Window) + 1; p.Limit > maxSimulated/windows {
		return usagef("--limit × windows simulated must be at most %d (got %d × %d): shorten --duration or lower --limit", maxSimulated, p.Limit, windows)
	}
	list, err := parseAlgorithms(*algs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pattern %s: %s\npolicy  %s, simulated %s\n\n", pat.Name, pat.Description, p, *duration)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\toffered\tadmitted\trejected\tworst window\tmax delay\t")
	var results []simulate.Result
	for _, alg := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.Run(alg, p, pat, *duration, *seed)
		if err != nil {
			return usagef("%s: %v", alg.Name(), err)
		}
		results = append(results, r)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t\n", r.Algorithm, r.Offered, r.Admitted, r.Rejected, r.WorstBurst, round(r.MaxDelay))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nworst window: the most units one client had admitted in any trailing %s (limit %d).\n", p.Window, p.Limit)
	if *out == "" {
		return nil
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := simulate.WritePNG(f, results, p, pat, *duration); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	w, h := simulate.PlotSize(len(results))
	fmt.Fprintf(stdout, "wrote %s (%dx%d PNG)\n", *out, w, h)
	return nil
}

// maxSimulated bounds Limit × windows in a simulation: with the patterns'
// load of up to about eight times the limit, some ten million requests.
const maxSimulated = 1_000_000

func patternNames() string {
	s := ""
	for i, p := range simulate.Patterns {
		if i > 0 {
			s += ", "
		}
		s += p.Name
	}
	return s
}

func patternList() string {
	s := ""
	for _, p := range simulate.Patterns {
		s += fmt.Sprintf("  %-12s %s\n", p.Name, p.Description)
	}
	return s
}

// parseAlgorithms turns "gcra,token-bucket" into algorithms; "" is all.
func parseAlgorithms(s string) ([]core.Algorithm, error) {
	if s == "" {
		return algorithm.All(), nil
	}
	var out []core.Algorithm
	for _, name := range splitComma(s) {
		a, err := algorithm.ByName(name)
		if err != nil {
			return nil, usageError{msg: err.Error()}
		}
		for _, b := range out {
			if b.Name() == a.Name() {
				return nil, usagef("%q is named twice in %q", a.Name(), s)
			}
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, usagef("no algorithm named in %q", s)
	}
	return out, nil
}

// modeFlags refuses what --pool and --regions would ignore: both at once,
// and a flag the chosen mode does not read (a flag set for nothing is a
// mistake the user should hear of).
func modeFlags(fs *flagSet, pool, regions bool) error {
	if pool && regions {
		return usagef("--pool and --regions are two simulations: choose one")
	}
	reads := map[string]bool{"pattern": true, "limit": true, "window": true, "burst": true, "duration": true, "out": true, "algorithms": true, "seed": true}
	mode := ""
	switch {
	case pool:
		mode, reads = "--pool", map[string]bool{"out": true, "pool": true}
	case regions:
		mode, reads = "--regions", map[string]bool{"limit": true, "window": true, "duration": true, "sync-period": true, "out": true, "regions": true}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && !reads[f.Name] && f.Name != "pool" && f.Name != "regions" {
			if mode == "" {
				err = usagef("--%s is for --regions", f.Name)
			} else {
				err = usagef("%s does not read --%s", mode, f.Name)
			}
		}
	})
	return err
}
