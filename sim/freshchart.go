package sim

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteFreshChart draws the freshness comparison as one PNG in dir: for each mix a panel of the
// share of requests served stale against capacity, one line per policy (FreshPolicies). It
// returns the chart, linked from the report through linkDir.
func WriteFreshChart(dir, linkDir string, rows []FreshRow) (Chart, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Chart{}, fmt.Errorf("sim: freshness chart: %w", err)
	}
	var mixes []string
	for _, r := range rows {
		if !slices.Contains(mixes, r.Mix) {
			mixes = append(mixes, r.Mix)
		}
	}
	plots := make([][]*plot.Plot, 0, len(mixes))
	for _, mix := range mixes {
		p := plot.New()
		p.Title.Text = "requests served stale: " + mix + " mix"
		p.X.Label.Text = "capacity, share of the cadences' demand"
		p.Y.Label.Text = "requests served stale"
		p.X.Tick.Marker = percentTicks{}
		p.Y.Tick.Marker = percentTicks{}
		p.Legend.Top = true
		p.Y.Min = 0
		top := 0.0
		for k, pol := range FreshPolicies {
			var pts plotter.XYs
			for _, r := range rows {
				if r.Mix == mix && r.Policy == pol {
					pts = append(pts, plotter.XY{X: r.Capacity, Y: r.StaleShare})
					top = max(top, r.StaleShare)
				}
			}
			if len(pts) == 0 {
				continue
			}
			slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return Chart{}, fmt.Errorf("sim: freshness chart: %w", err)
			}
			l.Color, s.Color = plotutil.Color(k), plotutil.Color(k)
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(k)
			s.Shape = plotutil.Shape(k)
			p.Add(l, s)
			p.Legend.Add(pol, l, s)
		}
		p.Y.Max = top * 1.35 // room for the legend
		plots = append(plots, []*plot.Plot{p})
	}
	w, h := 16*vg.Centimeter, vg.Length(len(plots))*9*vg.Centimeter
	img := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))}
	dc := vgdraw.New(img)
	tiles := vgdraw.Tiles{Rows: len(plots), Cols: 1, PadY: 6 * vg.Millimeter, PadTop: 2 * vg.Millimeter,
		PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return Chart{}, fmt.Errorf("sim: freshness chart: %w", err)
	}
	const file = "freshness-stale-share.png"
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return Chart{}, fmt.Errorf("sim: freshness chart: %w", err)
	}
	return Chart{Title: "requests served stale against capacity, per policy", Path: path, Link: linkDir + "/" + file}, nil
}

// percentTicks labels a linear axis of shares in percent, every 10 % (every 25 % past 100 %).
type percentTicks struct{}

func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 0.1
	if hi-lo > 1 {
		step = 0.25
	}
	var out []plot.Tick
	for i := int(lo / step); float64(i)*step <= hi+1e-9; i++ {
		v := float64(i) * step
		if v < lo-1e-9 {
			continue
		}
		out = append(out, plot.Tick{Value: v, Label: strings.TrimSuffix(fmt.Sprintf("%.0f %%", 100*v), " ")})
	}
	return out
}
