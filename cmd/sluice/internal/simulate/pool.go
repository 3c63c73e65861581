package simulate

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// The pool scenario: three tenants of different sizes, each with a base
// rate of its own, above it one burst pool shared by all, with a cap on
// each tenant's share (core.Pool). One tenant spikes for the middle third;
// the two others stay steady at their base.

// PoolTenant is one tenant of the scenario.
type PoolTenant struct {
	Name  string
	Base  int64   // guaranteed per second
	Rate  float64 // offered per second outside the spike
	Spike float64 // offered per second during the spike (0: Rate)
}

// PoolScenario is the scenario's shape.
type PoolScenario struct {
	Tenants    []PoolTenant
	Pool       int64 // shared burst per second
	Share      int64 // per-tenant cap on its draw from the pool, per second
	Duration   time.Duration
	From, To   time.Duration // the spike
	Resolution time.Duration // one plotted point per
}

// DefaultPool is the scenario the command runs.
func DefaultPool() PoolScenario {
	return PoolScenario{
		Tenants: []PoolTenant{
			{Name: "large", Base: 40, Rate: 36},
			{Name: "medium", Base: 20, Rate: 16, Spike: 120},
			{Name: "small", Base: 10, Rate: 10},
		},
		Pool: 40, Share: 30, Duration: 30 * time.Second, From: 10 * time.Second, To: 20 * time.Second,
		Resolution: time.Second,
	}
}

// PoolResult is what each tenant offered and was admitted, per point.
type PoolResult struct {
	Offered, Admitted, Pooled [][]int64 // [tenant][point]
}

// RunPool replays the scenario on a memory store under a simulated clock.
func RunPool(sc PoolScenario) (PoolResult, error) {
	if sc.Resolution <= 0 || sc.Duration <= 0 || sc.Duration/sc.Resolution > 10_000 {
		return PoolResult{}, fmt.Errorf("simulate: pool: bad duration or resolution")
	}
	clock := core.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memory.New(&memory.Options{Clock: clock, SweepInterval: -1})
	defer st.Close()
	mk := func(name string, perSecond int64) (*core.Limiter, error) {
		return core.New(core.Config{Policy: core.Policy{Name: name, Limit: perSecond, Window: time.Second}, Algorithm: algorithm.GCRA{}, Store: st, Clock: clock})
	}
	bases := map[string]*core.Limiter{}
	for _, tn := range sc.Tenants {
		l, err := mk("base-"+tn.Name, tn.Base)
		if err != nil {
			return PoolResult{}, err
		}
		bases[tn.Name] = l
	}
	share, err := mk("share", sc.Share)
	if err != nil {
		return PoolResult{}, err
	}
	pool, err := mk("pool", sc.Pool)
	if err != nil {
		return PoolResult{}, err
	}
	pl, err := core.NewPool(core.PoolConfig{BaseFor: func(t string) *core.Limiter { return bases[t] }, Share: share, Pool: pool})
	if err != nil {
		return PoolResult{}, err
	}
	points := int(sc.Duration / sc.Resolution)
	var r PoolResult
	for range sc.Tenants {
		r.Offered = append(r.Offered, make([]int64, points))
		r.Admitted = append(r.Admitted, make([]int64, points))
		r.Pooled = append(r.Pooled, make([]int64, points))
	}
	const tick = 5 * time.Millisecond
	carry := make([]float64, len(sc.Tenants))
	ctx := context.Background()
	for at := time.Duration(0); at < sc.Duration; at += tick {
		pt := int(at / sc.Resolution)
		for i, tn := range sc.Tenants {
			rate := tn.Rate
			if tn.Spike > 0 && at >= sc.From && at < sc.To {
				rate = tn.Spike
			}
			carry[i] += rate * tick.Seconds()
			for ; carry[i] >= 1; carry[i]-- {
				r.Offered[i][pt]++
				d, err := pl.Allow(ctx, tn.Name)
				if err != nil {
					return PoolResult{}, err
				}
				if d.Allowed {
					r.Admitted[i][pt]++
					if d.FromPool {
						r.Pooled[i][pt]++
					}
				}
			}
		}
		clock.Advance(tick)
	}
	return r, nil
}

var poolColors = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255},
}

// PoolPlotSize is the pixel size of WritePoolPNG's image.
func PoolPlotSize() (w, h int) {
	return int(PanelWidth.Dots(DPI) + 0.5), int((PanelHeight * 2).Dots(DPI) + 0.5)
}

// WritePoolPNG draws each tenant's admitted rate over time (solid), the
// spiking tenant's offered rate (dashed), and each tenant's base (dotted).
func WritePoolPNG(w io.Writer, r PoolResult, sc PoolScenario) error {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("base per tenant + a shared pool of %d/s (share capped at %d/s): one tenant spikes %s–%s", sc.Pool, sc.Share, sc.From, sc.To)
	pl.X.Label.Text = "seconds"
	pl.Y.Label.Text = "admitted per second"
	pl.Y.Min = 0
	res := sc.Resolution.Seconds()
	series := func(v []int64) plotter.XYs {
		var pts plotter.XYs
		for k, c := range v {
			x0, x1 := float64(k)*res, float64(k+1)*res
			pts = append(pts, plotter.XY{X: x0, Y: float64(c) / res}, plotter.XY{X: x1, Y: float64(c) / res})
		}
		return pts
	}
	var top float64
	for i, tn := range sc.Tenants {
		c := poolColors[i%len(poolColors)]
		line, err := plotter.NewLine(series(r.Admitted[i]))
		if err != nil {
			return err
		}
		line.Color, line.Width = c, vg.Points(2)
		pl.Add(line)
		pl.Legend.Add(fmt.Sprintf("%s admitted (base %d/s)", tn.Name, tn.Base), line)
		base, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(tn.Base)}, {X: sc.Duration.Seconds(), Y: float64(tn.Base)}})
		if err != nil {
			return err
		}
		base.Color, base.Dashes = c, []vg.Length{vg.Points(1), vg.Points(3)}
		pl.Add(base)
		if tn.Spike > 0 {
			off, err := plotter.NewLine(series(r.Offered[i]))
			if err != nil {
				return err
			}
			off.Color, off.Dashes = c, []vg.Length{vg.Points(5), vg.Points(3)}
			pl.Add(off)
			pl.Legend.Add(tn.Name+" offered", off)
		}
		for _, v := range r.Offered[i] {
			top = max(top, float64(v)/res)
		}
	}
	pl.Y.Max = top * 1.35
	pl.Add(plotter.NewGrid())
	pl.Legend.Top, pl.Legend.Left = true, true
	width, height := PanelWidth, PanelHeight*2
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(DPI))
	pl.Draw(draw.New(img))
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}
