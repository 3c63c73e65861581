package simulate

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"sync/atomic"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/region"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// RegionNames are the regions of a regions simulation.
var RegionNames = []string{"a", "b", "c"}

// Regions is the scenario of `sluice simulate --regions`: one global limit
// over three regions under a simulated clock. Region a asks Busy units a
// second until ShiftAt, region b after it; region c asks Quiet throughout;
// region b is cut off from the coordinator from CutFrom to CutTo.
type Regions struct {
	Limit          int64
	Window, Period time.Duration
	Duration       time.Duration
	ShiftAt        time.Duration
	CutFrom, CutTo time.Duration
	Busy, Quiet    float64
	LeasePeriods   int
	Algorithm      core.Algorithm // default FixedWindow
}

// DefaultRegions is the scenario for a limit and a window: 20 windows, the
// shift at the 7th, b cut off from the 11th to the 14th, a sync period of
// a fifth of the window.
func DefaultRegions(limit int64, window time.Duration) Regions {
	w := window
	return Regions{Limit: limit, Window: w, Period: w / 5, Duration: 20 * w, ShiftAt: 7 * w,
		CutFrom: 11 * w, CutTo: 14 * w, Busy: 3 * float64(limit) / w.Seconds(), Quiet: float64(limit) / 5 / w.Seconds()}
}

// RegionsResult is one mode's run: per aligned window, what each region
// admitted, and what the fleet asked.
type RegionsResult struct {
	Mode     region.Mode
	Admitted [][]int64 // [window][region]
	Asked    []int64   // [window]
	// Bound is the mode's most per window: the limit, or N × the limit
	// for slack.
	Bound int64
	// Worst is the most the fleet admitted in any window.
	Worst int64
	// Utilization is admitted / Σ min(asked, limit) over the windows.
	Utilization float64
	// Lease is the synced regions' lease (zero in the other modes).
	Lease time.Duration
}

// cuttable is a coordinator that one region can be cut off from.
type cuttable struct {
	s   store.Store
	cut *atomic.Bool
}

var errCut = errors.New("cut off from the coordinator")

func (c cuttable) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	if c.cut.Load() {
		return &store.Error{Op: "update", Err: errCut}
	}
	return c.s.Update(ctx, k, m)
}

// RunRegions runs the scenario in one mode, in steps of a hundredth of the
// window, on memory stores under a manual clock.
func RunRegions(mode region.Mode, sc Regions) (RegionsResult, error) {
	if sc.Window <= 0 || sc.Period <= 0 || sc.Duration <= 0 || sc.Duration/sc.Window > 10_000 {
		return RegionsResult{}, fmt.Errorf("simulate: regions: window, period and duration must be positive, and at most 10000 windows")
	}
	alg := sc.Algorithm
	if alg == nil {
		alg = algorithm.FixedWindow{}
	}
	// Start on a window's edge as the algorithms count windows: from the
	// Unix epoch (time.Time.Truncate counts from year 1).
	w := sc.Window.Nanoseconds()
	clk := core.NewManualClock(time.Unix(0, 1_800_000_000*int64(time.Second)/w*w))
	start := clk.Now()
	coord := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	n := len(RegionNames)
	var members []region.Member
	for _, name := range RegionNames {
		members = append(members, region.Member{Name: name, Weight: 1})
	}
	var regions []*region.Region
	cut := make([]atomic.Bool, n)
	for i, name := range RegionNames {
		r, err := region.New(region.Config{
			Mode: mode, Region: name, Members: members,
			Limiter: core.Config{
				Policy:    core.Policy{Name: "regions", Limit: sc.Limit, Window: sc.Window},
				Algorithm: alg,
				Store:     memory.New(&memory.Options{Clock: clk, SweepInterval: -1}),
				Clock:     clk,
			},
			Coordinator:  cuttable{s: coord, cut: &cut[i]},
			SyncPeriod:   sc.Period,
			LeasePeriods: sc.LeasePeriods,
			Clock:        clk,
		})
		if err != nil {
			return RegionsResult{}, err
		}
		regions = append(regions, r)
	}
	// A last window the duration ends in is simulated in part.
	windows := int((sc.Duration + sc.Window - 1) / sc.Window)
	res := RegionsResult{Mode: mode, Admitted: make([][]int64, windows), Asked: make([]int64, windows), Bound: sc.Limit, Lease: regions[0].Lease()}
	if mode == region.Slack {
		res.Bound = int64(n) * sc.Limit
	}
	for w := range res.Admitted {
		res.Admitted[w] = make([]int64, n)
	}
	step := sc.Window / 100
	owed := make([]float64, n)
	ctx := context.Background()
	for at := time.Duration(0); at < sc.Duration; at += step {
		for i, r := range regions {
			cut[i].Store(i == 1 && at >= sc.CutFrom && at < sc.CutTo)
			// Syncs spread over the period, region by region.
			if (at+time.Duration(i)*sc.Period/time.Duration(n))%sc.Period < step {
				_ = r.Sync(ctx) // a cut-off region's error is the scenario
			}
		}
		w := int(at / sc.Window)
		for i, r := range regions {
			owed[i] += regionDemand(sc, i, at) * step.Seconds()
			for ; owed[i] >= 1; owed[i]-- {
				res.Asked[w]++
				d, err := r.Allow(ctx, "fleet")
				if err != nil {
					return RegionsResult{}, err
				}
				if d.Allowed {
					res.Admitted[w][i]++
				}
			}
		}
		clk.Set(start.Add(at + step))
	}
	var admitted, served int64
	for w := range windows {
		var t int64
		for _, a := range res.Admitted[w] {
			t += a
		}
		res.Worst = max(res.Worst, t)
		admitted += t
		served += min(res.Asked[w], sc.Limit)
	}
	if served > 0 {
		res.Utilization = float64(admitted) / float64(served)
	}
	return res, nil
}

func regionDemand(sc Regions, i int, at time.Duration) float64 {
	switch {
	case i == 0 && at < sc.ShiftAt, i == 1 && at >= sc.ShiftAt:
		return sc.Busy
	case i == 2:
		return sc.Quiet
	}
	return 0
}

// RegionsTitle is the title of one mode's panel.
func RegionsTitle(r RegionsResult) string {
	return fmt.Sprintf("%s: worst window %d (bound %d), utilization %.0f%%", r.Mode, r.Worst, r.Bound, 100*r.Utilization)
}

// Colours of the regions' lines (the global line is black, the limit red).
var regionColors = []color.RGBA{{R: 31, G: 119, B: 180, A: 255}, {R: 44, G: 160, B: 44, A: 255}, {R: 148, G: 103, B: 189, A: 255}}

// RegionsPlotSize is the pixel size of the PNG that WriteRegionsPNG draws
// for n modes side by side.
func RegionsPlotSize(n int) (w, h int) {
	return int((PanelWidth / 2 * vg.Length(n)).Dots(DPI) + 0.5), int((PanelHeight * 3 / 2).Dots(DPI) + 0.5)
}

// WriteRegionsPNG draws one panel per mode, side by side: the fleet's
// admitted units per window against the global limit, and one line per
// region.
func WriteRegionsPNG(w io.Writer, results []RegionsResult, sc Regions) error {
	if len(results) == 0 {
		return fmt.Errorf("simulate: nothing to plot")
	}
	row := make([]*plot.Plot, len(results))
	var top int64
	for _, r := range results {
		top = max(top, r.Worst, sc.Limit)
	}
	for k, r := range results {
		pl := plot.New()
		pl.Title.Text = RegionsTitle(r)
		pl.X.Label.Text = "seconds"
		pl.Y.Label.Text = "admitted per window"
		pl.Y.Min, pl.Y.Max = 0, float64(top)*1.75 // room for the legend
		stairs := func(y func(w int) int64) plotter.XYs {
			var pts plotter.XYs
			for w := range r.Asked {
				x0, x1 := (time.Duration(w) * sc.Window).Seconds(), (time.Duration(w+1) * sc.Window).Seconds()
				pts = append(pts, plotter.XY{X: x0, Y: float64(y(w))}, plotter.XY{X: x1, Y: float64(y(w))})
			}
			return pts
		}
		for i, name := range RegionNames {
			line, err := plotter.NewLine(stairs(func(w int) int64 { return r.Admitted[w][i] }))
			if err != nil {
				return err
			}
			line.Color, line.Width = regionColors[i], vg.Points(1)
			pl.Add(line)
			pl.Legend.Add("region "+name, line)
		}
		global, err := plotter.NewLine(stairs(func(w int) int64 {
			var t int64
			for _, a := range r.Admitted[w] {
				t += a
			}
			return t
		}))
		if err != nil {
			return err
		}
		global.Color, global.Width = color.RGBA{A: 255}, vg.Points(2)
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(sc.Limit)}, {X: sc.Duration.Seconds(), Y: float64(sc.Limit)}})
		if err != nil {
			return err
		}
		limit.Color = color.RGBA{R: 214, G: 39, B: 40, A: 255}
		limit.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(plotter.NewGrid(), global, limit)
		pl.Legend.Add("global", global)
		pl.Legend.Add("limit", limit)
		pl.Legend.Top, pl.Legend.Left = true, true
		row[k] = pl
	}
	width, height := PanelWidth/2*vg.Length(len(results)), PanelHeight*3/2
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(DPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(results), PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadX: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for k := range row {
		row[k].Draw(canvases[0][k])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}
