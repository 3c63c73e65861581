package simulate

import (
	"fmt"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sluicehq/sluice/core"
)

// Plot geometry: one panel per algorithm, stacked, at DPI dots per inch.
const (
	DPI         = 96
	PanelWidth  = 10 * vg.Inch
	PanelHeight = 2 * vg.Inch
)

// PlotSize is the pixel size of the PNG that WritePNG draws for n panels.
func PlotSize(n int) (w, h int) {
	return int(PanelWidth.Dots(DPI) + 0.5), int((PanelHeight * vg.Length(n)).Dots(DPI) + 0.5)
}

// PanelTitle is the title of r's panel. A queue's panel (the leaky bucket)
// says how many admissions it delayed: they start late, at the drain rate,
// so a window's length can see more than the limit start without any
// over-admission (the bound is the bucket's, Burst + ⌊(d + MaxDelay)/T⌋).
func PanelTitle(r Result, p core.Policy, pat Pattern) string {
	title := fmt.Sprintf("%s — %s: admitted %d of %d", r.Algorithm, pat.Name, r.Admitted, r.Offered)
	if r.Delayed > 0 {
		title += fmt.Sprintf(", %d queued, started up to %s late (delayed, not over-admitted)",
			r.Delayed, r.MaxDelay.Round(time.Millisecond))
	}
	return title + fmt.Sprintf(", worst window %d (limit %d)", r.WorstBurst, p.Limit)
}

// WritePNG draws one panel per result: the units admitted to the busiest
// tenant in the trailing window (of the policy's length) over time, against
// the limit, which applies per tenant. A fixed
// window's boundary burst climbs to twice the line; a sliding log never
// crosses it.
func WritePNG(w io.Writer, results []Result, p core.Policy, pat Pattern, d time.Duration) error {
	if len(results) == 0 {
		return fmt.Errorf("simulate: nothing to plot")
	}
	rows := make([][]*plot.Plot, len(results))
	for i, r := range results {
		pl := plot.New()
		pl.Title.Text = PanelTitle(r, p, pat)
		pl.X.Label.Text = "seconds"
		pl.Y.Label.Text = "in window"
		pl.Y.Min = 0
		pl.Y.Max = float64(max(r.WorstBurst, 2*p.Limit)) * 1.1

		var starts []time.Duration
		for _, s := range r.ByTenant {
			if len(s) > len(starts) {
				starts = s
			}
		}
		line, err := plotter.NewLine(windowSeries(starts, p.Window, d))
		if err != nil {
			return err
		}
		line.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
		line.Width = vg.Points(1.5)
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(p.Limit)}, {X: d.Seconds(), Y: float64(p.Limit)}})
		if err != nil {
			return err
		}
		limit.Color = color.RGBA{R: 214, G: 39, B: 40, A: 255}
		limit.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(plotter.NewGrid(), line, limit)
		rows[i] = []*plot.Plot{pl}
	}
	width, height := PanelWidth, PanelHeight*vg.Length(len(results))
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(DPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(results), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(6)}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// maxPoints bounds the points of a panel's line: four to a pixel of its
// width, so that a day of traffic draws in a second, not in minutes and a
// gigabyte.
const maxPoints = 4000

// windowSeries is the line of a panel: the starts in the trailing window
// (of length window) sampled every window/20 from 0 to d, each sample the
// highest count since the last one, at its instant (a count peaks at a
// start, and may fall again before the next sample: the line reaches the
// worst window the title states); past maxPoints such samples, the
// highest of each run of them, so that no burst is lost to the coarser
// line.
func windowSeries(starts []time.Duration, window, d time.Duration) plotter.XYs {
	step := window / 20
	if step <= 0 {
		step = time.Millisecond
	}
	per := max(1, int64(d/step+1+maxPoints-1)/maxPoints) // samples a point stands for
	pts := make(plotter.XYs, 0, min(int64(d/step)+1, maxPoints)+1)
	lo, hi := 0, 0
	var n int64
	best := plotter.XY{Y: -1}
	for t := time.Duration(0); t <= d; t += step {
		for hi < len(starts) && starts[hi] <= t {
			// The count at this start's instant, every start at it in.
			s := starts[hi]
			for hi < len(starts) && starts[hi] == s {
				hi++
			}
			for lo < hi && starts[lo] <= s-window {
				lo++
			}
			if y := float64(hi - lo); y > best.Y {
				best = plotter.XY{X: s.Seconds(), Y: y}
			}
		}
		for lo < hi && starts[lo] <= t-window {
			lo++
		}
		if y := float64(hi - lo); y > best.Y {
			best = plotter.XY{X: t.Seconds(), Y: y}
		}
		if n++; n%per == 0 {
			pts = append(pts, best)
			best.Y = -1
		}
	}
	if best.Y >= 0 {
		pts = append(pts, best)
	}
	return pts
}
