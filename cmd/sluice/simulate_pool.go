package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/sluicehq/sluice/cmd/sluice/internal/simulate"
)

// runSimulatePool is `sluice simulate --pool`: three tenants of different
// sizes, each with its base rate, and a burst pool shared by all with a
// cap on each tenant's share (core.Pool); one spikes, two stay steady. A
// table per phase and a PNG of each tenant's admitted rate. --out defaults
// to sluice-pool.png.
func runSimulatePool(ctx context.Context, fs *flagSet, out string, stdout io.Writer) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["out"] {
		out = "sluice-pool.png"
	}
	sc := simulate.DefaultPool()
	fmt.Fprintf(stdout, "three tenants, each with a base rate, and a burst pool of %d/s shared by all (each tenant's share capped at %d/s); every rate is GCRA, with a burst of one second's worth\n", sc.Pool, sc.Share)
	for _, tn := range sc.Tenants {
		if tn.Spike > 0 {
			fmt.Fprintf(stdout, "  %-7s base %3d/s, offers %3.0f/s, and %3.0f/s from %s to %s\n", tn.Name, tn.Base, tn.Rate, tn.Spike, sc.From, sc.To)
		} else {
			fmt.Fprintf(stdout, "  %-7s base %3d/s, offers %3.0f/s throughout\n", tn.Name, tn.Base, tn.Rate)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := simulate.RunPool(sc)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\tphase\toffered/s\tadmitted/s\tfrom pool/s\t")
	secs := func(from, to int) float64 { return float64(to-from) * sc.Resolution.Seconds() }
	from, to := int(sc.From/sc.Resolution), int(sc.To/sc.Resolution)
	for i, tn := range sc.Tenants {
		for _, ph := range []struct {
			name   string
			lo, hi int
		}{{"before", 0, from}, {"spike", from, to}, {"after", to, len(r.Offered[i])}} {
			var o, a, p int64
			for k := ph.lo; k < ph.hi; k++ {
				o, a, p = o+r.Offered[i][k], a+r.Admitted[i][k], p+r.Pooled[i][k]
			}
			s := secs(ph.lo, ph.hi)
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t\n", tn.Name, ph.name, float64(o)/s, float64(a)/s, float64(p)/s)
		}
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\nthe spiking tenant gets its base plus at most its share of the pool, each a rate with a second's burst on top\n(so over a spike of a few seconds a little more than their sum a second); the steady ones keep their base throughout.")
	if out == "" {
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := simulate.WritePoolPNG(f, r, sc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	w, h := simulate.PoolPlotSize()
	fmt.Fprintf(stdout, "wrote %s (%dx%d PNG)\n", out, w, h)
	return nil
}
