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
	step := p.Window / 20
	if step <= 0 {
		step = time.Millisecond
	}
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
		var pts plotter.XYs
		lo, hi := 0, 0
		for t := time.Duration(0); t <= d; t += step {
			for hi < len(starts) && starts[hi] <= t {
				hi++
			}
			for lo < hi && starts[lo] <= t-p.Window {
				lo++
			}
			pts = append(pts, plotter.XY{X: t.Seconds(), Y: float64(hi - lo)})
		}
		line, err := plotter.NewLine(pts)
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
