package sim

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart is one SVG written for the report.
type Chart struct {
	Title string
	Path  string // where it was written
	Link  string // how the report links to it
}

// WriteCharts draws, for each policy, the lateness of every class over time at every capacity
// (one panel per capacity, stacked), as SVG files in dir. linkDir is how the report reaches dir.
// The route classes and the discovered source class are drawn; the submitted class is their
// complement and would only crowd the panel.
func WriteCharts(dir, linkDir string, results []*Result, mix *Mix) ([]Chart, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: charts: %w", err)
	}
	var byPolicy []string
	panels := map[string][]*Result{}
	for _, res := range results {
		name := res.Scenario.Name
		if _, ok := panels[name]; !ok {
			byPolicy = append(byPolicy, name)
		}
		panels[name] = append(panels[name], res)
	}
	nr := len(mix.Classes)
	draws := make([]int, 0, nr+1)
	for k := range nr {
		draws = append(draws, k)
	}
	draws = append(draws, nr+extraDiscovered)
	var out []Chart
	for _, name := range byPolicy {
		rs := panels[name]
		plots := make([][]*plot.Plot, len(rs))
		for i, res := range rs {
			p, err := lateness(res, draws, mix.Limit(res.Scenario.Capacity))
			if err != nil {
				return nil, fmt.Errorf("sim: chart %s: %w", name, err)
			}
			plots[i] = []*plot.Plot{p}
		}
		w, h := 18*vg.Centimeter, vg.Length(len(rs))*7*vg.Centimeter
		img := vgsvg.New(w, h)
		dc := vgdraw.New(img)
		tiles := vgdraw.Tiles{Rows: len(rs), Cols: 1, PadY: 4 * vg.Millimeter, PadTop: 2 * vg.Millimeter,
			PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
		canvases := plot.Align(plots, tiles, dc)
		for i := range plots {
			plots[i][0].Draw(canvases[i][0])
		}
		var buf bytes.Buffer
		if _, err := img.WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("sim: chart %s: %w", name, err)
		}
		file := "lateness-" + slug(name) + ".svg"
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("sim: chart %s: %w", name, err)
		}
		out = append(out, Chart{Title: "lateness by class over time: " + name, Path: path, Link: linkDir + "/" + file})
	}
	return out, nil
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.ReplaceAll(strings.Trim(b.String(), "-"), "--", "-")
}

// lateness is one panel: each drawn class's hourly mean age ÷ TTL on a log scale, with the
// physical limit as a dashed line and the end of the warm-up as a dotted one.
func lateness(res *Result, draws []int, limit float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s at %s capacity", res.Scenario.Name, pct(res.Scenario.Capacity))
	p.X.Label.Text = "hours since start"
	p.Y.Label.Text = "age at render ÷ TTL"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ratioTicks{}
	p.Legend.Top = true
	step := res.SampleEvery.Hours()
	lo, hi := math.Inf(1), 0.0
	for _, k := range draws {
		var pts plotter.XYs
		for i, v := range res.Series[k] {
			if !math.IsNaN(v) && v > 0 {
				pts = append(pts, plotter.XY{X: float64(i+1) * step, Y: v})
				lo, hi = min(lo, v), max(hi, v)
			}
		}
		if len(pts) == 0 {
			continue // nothing rendered: no line (the table says it starved)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(k)
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(res.Classes[k].Name, l)
	}
	if hi == 0 {
		lo, hi = 1, 2
	}
	p.Y.Min = math.Min(0.9, lo)
	p.Y.Max = math.Max(hi, limit) * 2.5 // headroom on the log scale for the legend
	end := float64(len(res.Series[0])) * step
	p.X.Min, p.X.Max = 0, end
	guide := func(pts plotter.XYs, dashes []vg.Length) error {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 96}
		l.Width = vg.Points(0.75)
		l.Dashes = dashes
		p.Add(l)
		return nil
	}
	if err := guide(plotter.XYs{{X: 0, Y: limit}, {X: end, Y: limit}}, []vg.Length{vg.Points(4), vg.Points(3)}); err != nil {
		return nil, err
	}
	warm := res.Warmup.Hours()
	if err := guide(plotter.XYs{{X: warm, Y: p.Y.Min}, {X: warm, Y: p.Y.Max}}, []vg.Length{vg.Points(1), vg.Points(2)}); err != nil {
		return nil, err
	}
	return p, nil
}

// ratioTicks labels a log axis of ratios at 1, 1.5, 2, 3, 5 and their powers of ten.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 1.5, 2, 3, 5, 7} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			label := ""
			if m != 7 {
				label = fmt.Sprintf("%g×", v)
			}
			out = append(out, plot.Tick{Value: v, Label: label})
		}
	}
	return out
}
