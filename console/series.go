package console

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
)

// SeriesLen is how many samples the ring keeps: 24 hours at one a minute.
const SeriesLen = 24 * 60

// Sample is one minute of the figures the overview charts. Lateness is age ÷ cadence at
// grant of the rows granted in the minute, by lane (Lanes' order): the p90 and the worst, as
// the upper bound of the freshq_lateness_ratio bucket they fall in; -1 for a figure past the
// last bound (+Inf, which JSON cannot carry); null when the lane had no grant in the minute.
type Sample struct {
	AtMs          int64       `json:"at_ms"` // the minute, its start
	RendersPerSec float64     `json:"renders_per_second"`
	Backlog       [4]uint64   `json:"backlog"`
	P90           [4]*float64 `json:"p90_lateness"`
	Worst         [4]*float64 `json:"worst_lateness"`
	StaleShare    float64     `json:"stale_share"`
}

// Ring is the bounded series: the last SeriesLen minutes, one sample each. Safe for
// concurrent use.
type Ring struct {
	mu   sync.Mutex
	buf  []Sample
	next int
	full bool
}

// NewRing returns an empty ring of SeriesLen samples.
func NewRing() *Ring { return &Ring{buf: make([]Sample, SeriesLen)} }

// Add keeps s, dropping the oldest sample once full. A sample of the same minute as the
// last replaces it; one older than the last is dropped (the clock went back).
func (r *Ring) Add(s Sample) {
	s.AtMs -= s.AtMs % 60000
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.lenLocked(); n > 0 {
		last := &r.buf[(r.next+len(r.buf)-1)%len(r.buf)]
		if s.AtMs == last.AtMs {
			*last = s
			return
		}
		if s.AtMs < last.AtMs {
			return
		}
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

func (r *Ring) lenLocked() int {
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// Snapshot is the samples, oldest first.
func (r *Ring) Snapshot() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.lenLocked()
	out := make([]Sample, 0, n)
	start := 0
	if r.full {
		start = r.next
	}
	for i := range n {
		out = append(out, r.buf[(start+i)%len(r.buf)])
	}
	return out
}

func (c *Console) samples() []Sample {
	if c.opt.Series == nil {
		return nil
	}
	return c.opt.Series()
}

func (c *Console) seriesReady(*http.Request) bool { return len(c.samples()) > 0 }

// laneColours are the chart's colours by lane (Lanes' order).
var laneColours = [4]string{"#b42318", "#2857c5", "#067647", "#7a5af8"}

// chart draws worst and p90 lateness ÷ cadence by lane over the ring's 24 h as SVG.
func (c *Console) chart(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write([]byte(ChartSVG(c.samples())))
}

// ChartSVG is the chart of samples: x the last 24 h ending at the last sample, y the ratio on
// a scale from 0 to the largest finite value (at least 2), a polyline per lane and figure, a
// circle per point (class "pt", for a reader to count).
func ChartSVG(samples []Sample) string {
	const W, H, L, R, T, B = 900.0, 300.0, 48.0, 110.0, 12.0, 28.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`, W, H, W, H)
	b.WriteString(`<rect width="100%" height="100%" fill="#fff"/>`)
	ymax := 2.0
	for _, s := range samples {
		for i := range 4 {
			for _, p := range []*float64{s.P90[i], s.Worst[i]} {
				if p != nil && *p > ymax && !math.IsInf(*p, 0) {
					ymax = *p
				}
			}
		}
	}
	var end int64
	if len(samples) > 0 {
		end = samples[len(samples)-1].AtMs
	}
	start := end - (SeriesLen-1)*60000
	x := func(ms int64) float64 { return L + (W-L-R)*float64(ms-start)/float64(end-start) }
	y := func(v float64) float64 {
		if v < 0 || v > ymax { // +Inf is drawn at the top
			v = ymax
		}
		return H - B - (H-T-B)*v/ymax
	}
	for _, g := range []float64{0, 1, ymax / 2, ymax} {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#d9dee7"/><text x="%.1f" y="%.1f" text-anchor="end" fill="#667085">%.1f</text>`,
			L, W-R, y(g), y(g), L-6, y(g)+4, g)
	}
	for h := 0; h <= 24; h += 6 {
		ms := start + int64(h)*3600000
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#667085">-%dh</text>`, x(ms), H-8, 24-h)
	}
	for lane := range 4 {
		for k, dash := range []string{"", ` stroke-dasharray="4 3"`} {
			var pts []string
			for _, s := range samples {
				p := s.P90[lane]
				if k == 1 {
					p = s.Worst[lane]
				}
				if p == nil {
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.AtMs), y(*p)))
			}
			if len(pts) == 0 {
				continue
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`, laneColours[lane], dash, strings.Join(pts, " "))
			if k == 0 {
				for _, pt := range pts {
					xy := strings.SplitN(pt, ",", 2)
					fmt.Fprintf(&b, `<circle class="pt" cx="%s" cy="%s" r="2" fill="%s"/>`, xy[0], xy[1], laneColours[lane])
				}
			}
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`,
			W-R+10, T+10+float64(lane)*18, laneColours[lane], W-R+28, T+14+float64(lane)*18, Lanes[lane])
	}
	if len(samples) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#667085">no sample yet</text>`, W/2, H/2)
	}
	b.WriteString(`</svg>`)
	return b.String()
}
