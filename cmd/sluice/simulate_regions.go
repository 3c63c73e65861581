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

	"github.com/sluicehq/sluice/cmd/sluice/internal/simulate"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/region"
)

// runSimulateRegions is `sluice simulate --regions`: the regions scenario
// in the three modes, a table of the fleet's admitted units per window,
// and a PNG with the modes side by side. Flags the user did not set take
// the scenario's defaults: a limit of 100, 20 windows, sluice-regions.png.
func runSimulateRegions(ctx context.Context, fs *flagSet, limit int64, window, duration, period time.Duration, out string, stdout io.Writer) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["limit"] {
		limit = 100
	}
	if !set["out"] {
		out = "sluice-regions.png"
	}
	p := core.Policy{Name: "regions", Limit: limit, Window: window}
	if err := p.Validate(); err != nil {
		return usageError{msg: err.Error()}
	}
	// The synced mode's bounds, in the flags that set them: it syncs at
	// most every 1ms, by default every fifth of a window, and its lease
	// (a window, and a few periods, at most a window each) fits in 30 days.
	if window > 100*time.Hour {
		return usagef("--window must be at most 100h with --regions, got %s", window)
	}
	if period == 0 && window/5 < time.Millisecond {
		return usagef("--window %s is too short for --regions without --sync-period: the regions sync every fifth of a window by default (%s), and at most every 1ms; give --sync-period 1ms, or a --window of at least 5ms", window, window/5)
	}
	if limit < 12 || limit > 100_000 {
		return usagef("--limit must be 12 to 100000 with --regions (three regions, a floor of a twelfth each), got %d", limit)
	}
	sc := simulate.DefaultRegions(limit, window)
	if set["duration"] {
		if duration < 10*window || duration > 1000*window {
			return usagef("--duration must be 10 to 1000 windows with --regions, got %s", duration)
		}
		sc.Duration = duration
		sc.ShiftAt, sc.CutFrom, sc.CutTo = duration*7/20, duration*11/20, duration*14/20
	}
	if period != 0 {
		if period < window/100 || period > window {
			return usagef("--sync-period must be from a hundredth of --window to --window, got %s", period)
		}
		if period < time.Millisecond {
			return usagef("--sync-period must be at least 1ms (the regions sync at most every 1ms), got %s", period)
		}
		sc.Period = period
	}
	fmt.Fprintf(stdout, "one global limit of %d per %s over regions a, b, c (floor %d each)\n", limit, window, limit/12)
	fmt.Fprintf(stdout, "a asks %s until %s, then b does; c asks %s throughout; b is cut off from the coordinator %s–%s\n",
		rate(sc.Busy), sc.ShiftAt, rate(sc.Quiet), sc.CutFrom, sc.CutTo)
	var results []simulate.RegionsResult
	for _, mode := range []region.Mode{region.Static, region.Synced, region.Slack} {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := simulate.RunRegions(mode, sc)
		if err != nil {
			return usagef("%s: %v", mode, err)
		}
		results = append(results, r)
		if mode == region.Synced {
			fmt.Fprintf(stdout, "synced: a sync every %s, a lease of %s; simulated %s\n\n", sc.Period, r.Lease, sc.Duration)
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"window", "min(asked,limit)"}
	for _, r := range results {
		head = append(head, r.Mode.String())
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for w := range results[0].Asked {
		row := []string{fmt.Sprint(w), fmt.Sprint(min(results[0].Asked[w], limit))}
		for _, r := range results {
			var t int64
			for _, a := range r.Admitted[w] {
				t += a
			}
			row = append(row, fmt.Sprint(t))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	for _, r := range results {
		fmt.Fprintln(stdout, simulate.RegionsTitle(r))
	}
	if out == "" {
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := simulate.WriteRegionsPNG(f, results, sc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	w, h := simulate.RegionsPlotSize(len(results))
	fmt.Fprintf(stdout, "wrote %s (%dx%d PNG)\n", out, w, h)
	return nil
}
