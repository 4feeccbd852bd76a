package top

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/clitext"
	"github.com/freshq/freshq/wire"
)

// Sample is one line of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics reads the Prometheus text exposition format (comments skipped, timestamps
// ignored).
func ParseMetrics(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("/metrics: %v in %q", err, clitext.Truncate(line, 60))
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, errors.New("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return s, errors.New("unterminated labels")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, errors.New("bad label")
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, errors.New("unterminated label value")
			}
			s.Labels[key] = val.String()
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, errors.New("no value")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("bad value %q", f[0])
	}
	s.Value = v
	return s, nil
}

// histogram is one lane's lateness histogram: cumulative bucket counts by upper bound.
type histogram struct {
	bounds []float64 // sorted, +Inf last if present
	counts []float64
	sum    float64
	count  float64
}

// sub is h minus an earlier Scrape of the same histogram: the grants in between.
func (h histogram) sub(prev histogram) histogram {
	if len(prev.counts) != len(h.counts) || prev.count > h.count {
		return h // a restart reset the counters
	}
	d := histogram{bounds: h.bounds, counts: make([]float64, len(h.counts)), sum: h.sum - prev.sum, count: h.count - prev.count}
	for i := range h.counts {
		d.counts[i] = h.counts[i] - prev.counts[i]
	}
	return d
}

// quantile estimates the q-quantile by linear interpolation within the bucket, as Prometheus'
// histogram_quantile does. ok is false without observations; inf is true when it falls in the
// +Inf bucket (the value is then the largest finite bound).
func (h histogram) quantile(q float64) (v float64, inf, ok bool) {
	if h.count <= 0 || len(h.bounds) == 0 {
		return 0, false, false
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(b, 1) {
				return lower, true, true
			}
			in := h.counts[i] - below
			if in <= 0 {
				return b, false, true
			}
			return lower + (b-lower)*(rank-below)/in, false, true
		}
		lower, below = b, h.counts[i]
	}
	return lower, true, true
}

// shareAbove is the share of observations above bound (which must be a bucket bound).
func (h histogram) shareAbove(bound float64) (float64, bool) {
	if h.count <= 0 {
		return 0, false
	}
	for i, b := range h.bounds {
		if b == bound {
			return 1 - h.counts[i]/h.count, true
		}
	}
	return 0, false
}

// Scrape is what top reads from one /metrics answer.
type Scrape struct {
	at         time.Time
	backlog    map[string]float64
	lateness   map[string]histogram
	renders    map[string]float64 // by outcome
	leases     float64
	published  float64
	pinned     float64
	belowFloor float64
	restarts   float64
}

// NewScrape collects a scrape's figures from the samples of one /metrics answer read at at.
func NewScrape(samples []Sample, at time.Time) *Scrape {
	s := &Scrape{at: at, backlog: map[string]float64{}, lateness: map[string]histogram{}, renders: map[string]float64{}}
	type bucket struct{ le, n float64 }
	buckets := map[string][]bucket{}
	for _, m := range samples {
		lane := m.Labels["lane"]
		switch m.Name {
		case "freshq_backlog":
			s.backlog[lane] = m.Value
		case "freshq_lateness_ratio_bucket":
			le, err := strconv.ParseFloat(m.Labels["le"], 64)
			if err == nil {
				buckets[lane] = append(buckets[lane], bucket{le, m.Value})
			}
		case "freshq_lateness_ratio_sum":
			h := s.lateness[lane]
			h.sum = m.Value
			s.lateness[lane] = h
		case "freshq_lateness_ratio_count":
			h := s.lateness[lane]
			h.count = m.Value
			s.lateness[lane] = h
		case "freshq_render_total":
			s.renders[m.Labels["outcome"]] = m.Value
		case "freshq_leases_live":
			s.leases = m.Value
		case "freshq_ready_published":
			s.published = m.Value
		case "freshq_floor_pinned_seconds":
			s.pinned = m.Value
		case "freshq_below_floor":
			s.belowFloor = m.Value
		case "freshq_worker_restarts_total":
			s.restarts += m.Value
		}
	}
	for lane, bs := range buckets {
		sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
		h := s.lateness[lane]
		for _, b := range bs {
			h.bounds = append(h.bounds, b.le)
			h.counts = append(h.counts, b.n)
		}
		s.lateness[lane] = h
	}
	return s
}

func (s *Scrape) renderTotal() float64 {
	t := 0.0
	for _, v := range s.renders {
		t += v
	}
	return t
}

// LaneRow is one lane of a Frame (and of top --json).
type LaneRow struct {
	Lane      string   `json:"lane"`
	Backlog   float64  `json:"backlog"`
	Grants    float64  `json:"grants"`
	GrantRate *float64 `json:"grants_per_second,omitempty"`
	P50       *float64 `json:"lateness_p50,omitempty"`
	P90       *float64 `json:"lateness_p90,omitempty"`
	Mean      *float64 `json:"lateness_mean,omitempty"`
	Late      *float64 `json:"share_over_one_cadence,omitempty"`
	P90Inf    bool     `json:"-"` // P90 fell in the +Inf bucket: it is the largest finite bound
}

// Frame is one refresh of top.
type Frame struct {
	At         time.Time `json:"at"`
	Window     string    `json:"window"` // "since start" or the interval since the last Frame
	Renders    float64   `json:"renders"`
	RenderRate *float64  `json:"renders_per_second,omitempty"`
	OKShare    *float64  `json:"ok_share,omitempty"`
	Leases     float64   `json:"leases_live"`
	Ready      float64   `json:"ready_published"`
	Pinned     float64   `json:"floor_pinned_seconds"`
	BelowFloor float64   `json:"below_floor"`
	Restarts   float64   `json:"worker_restarts"`
	Lanes      []LaneRow `json:"lanes"`
	// Capacity is worker 0's capacity view (the capacity section of /v1/queue); nil when it
	// could not be read.
	Capacity *wire.Capacity `json:"capacity,omitempty"`
	// Freshness is the share of crawler requests served stale (/v1/queue's freshness section).
	Freshness *wire.QueueFreshness `json:"freshness,omitempty"`
	// Hosts are the first shownHosts hosts held back (paused, or limited below their maximum) of
	// /v1/queue's hosts, the most held back first; HostsHeld counts them all.
	Hosts     []wire.QueueHost `json:"hosts,omitempty"`
	HostsHeld int              `json:"hosts_held_back,omitempty"`
	// Farm is how this node divides every host's limit with the cluster's other live nodes
	// (/v1/queue's cluster.farm); nil on a node alone.
	Farm *wire.QueueFarm `json:"farm,omitempty"`
	// FarmCapacity is the whole farm's capacity (/v1/queue's cluster.capacity), with
	// --cluster only; NoCluster says the node is in no cluster (a Frame asked for it).
	FarmCapacity *wire.FarmCapacity `json:"farm_capacity,omitempty"`
	NoCluster    bool               `json:"no_cluster,omitempty"`
}

// shownHosts is how many held-back hosts a Frame lists.
const shownHosts = 10

func ptr(v float64) *float64 { return &v }

// MakeFrame turns a Scrape, and the one before it if any, into a Frame: lateness over the
// interval between them when grants happened in it, else since the start.
func MakeFrame(cur, prev *Scrape) Frame {
	f := Frame{At: cur.at, Window: "since start", Renders: cur.renderTotal(), Leases: cur.leases, Ready: cur.published,
		Pinned: cur.pinned, BelowFloor: cur.belowFloor, Restarts: cur.restarts}
	var dt float64
	if prev != nil {
		dt = cur.at.Sub(prev.at).Seconds()
	}
	renders, ok := f.Renders, cur.renders["ok"]
	if prev != nil && dt > 0 {
		if d := f.Renders - prev.renderTotal(); d >= 0 {
			f.RenderRate = ptr(d / dt)
			renders, ok = d, cur.renders["ok"]-prev.renders["ok"]
		}
	}
	if renders > 0 {
		f.OKShare = ptr(ok / renders)
	}
	lanes := map[string]uint64{}
	for l := range cur.backlog {
		lanes[l] = 0
	}
	for l := range cur.lateness {
		lanes[l] = 0
	}
	windowed := false
	for _, l := range clitext.Lanes(lanes) {
		h := cur.lateness[l]
		r := LaneRow{Lane: l, Backlog: cur.backlog[l], Grants: h.count}
		if prev != nil && dt > 0 {
			d := h.sub(prev.lateness[l])
			r.GrantRate = ptr(d.count / dt)
			if d.count > 0 {
				h, windowed = d, true
			}
		}
		if v, _, ok := h.quantile(0.5); ok {
			r.P50 = ptr(v)
		}
		if v, inf, ok := h.quantile(0.9); ok {
			r.P90, r.P90Inf = ptr(v), inf
		}
		if h.count > 0 {
			r.Mean = ptr(h.sum / h.count)
		}
		if v, ok := h.shareAbove(1); ok {
			r.Late = ptr(v)
		}
		f.Lanes = append(f.Lanes, r)
	}
	if windowed {
		f.Window = "last " + clitext.Duration(time.Duration(dt*float64(time.Second)).Round(100*time.Millisecond))
	}
	return f
}

func num(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// Print writes a frame of the node at server in at most 80 columns; live adds the refresh
// interval to the header.
func Print(w io.Writer, server string, f Frame, every time.Duration, live bool) {
	head := fmt.Sprintf("freshq top  %s  %s", strings.TrimPrefix(server, "http://"), f.At.UTC().Format("15:04:05Z"))
	if live {
		head += fmt.Sprintf("  every %s, Ctrl-C quits", clitext.Duration(every))
	}
	fmt.Fprintln(w, clitext.Truncate(head, 79))
	renders := fmt.Sprintf("renders %.0f", f.Renders)
	if f.RenderRate != nil {
		renders += fmt.Sprintf(" (%.1f/s)", *f.RenderRate)
	}
	if f.OKShare != nil {
		renders += fmt.Sprintf(", %.1f%% ok", *f.OKShare*100)
	}
	status := fmt.Sprintf("%s  leases %.0f  ready %.0f  floor pinned %s", renders, f.Leases, f.Ready,
		clitext.Duration(time.Duration(f.Pinned*float64(time.Second)).Round(time.Second)))
	fmt.Fprintln(w, clitext.Truncate(status, 79))
	var warn []string
	if f.BelowFloor > 0 {
		warn = append(warn, fmt.Sprintf("below floor %.0f (must be 0)", f.BelowFloor))
	}
	if f.Restarts > 0 {
		warn = append(warn, fmt.Sprintf("worker restarts %.0f", f.Restarts))
	}
	if len(warn) > 0 {
		fmt.Fprintln(w, clitext.Truncate(strings.Join(warn, "  "), 79))
	}
	for _, l := range CapacityLines(f.Capacity) {
		fmt.Fprintln(w, clitext.Truncate(l, 79))
	}
	if l := FreshnessLine(f.Freshness); l != "" {
		fmt.Fprintln(w, clitext.Truncate(l, 79))
	}
	if l := FarmLine(f.Farm); l != "" {
		fmt.Fprintln(w, clitext.Truncate(l, 79))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-11s %9s %10s %8s  %s\n", "", "", "", "", "lateness × cadence ("+f.Window+")")
	fmt.Fprintf(w, "%-11s %9s %10s %8s %6s %6s %6s %6s\n", "LANE", "BACKLOG", "GRANTS", "/s", "p50", "p90", "mean", ">1×")
	for _, r := range f.Lanes {
		p90 := num(r.P90, "%.2f")
		if r.P90Inf {
			p90 = ">" + num(r.P90, "%.0f")
		}
		late := "-"
		if r.Late != nil {
			late = fmt.Sprintf("%.0f%%", *r.Late*100)
		}
		fmt.Fprintf(w, "%-11s %9.0f %10.0f %8s %6s %6s %6s %6s\n", clitext.Truncate(r.Lane, 11), r.Backlog, r.Grants,
			num(r.GrantRate, "%.1f"), num(r.P50, "%.2f"), p90, num(r.Mean, "%.2f"), late)
	}
	for _, l := range HostLines(f.Hosts, f.HostsHeld, f.At) {
		fmt.Fprintln(w, clitext.Truncate(l, 79))
	}
	for _, l := range FarmLines(f.FarmCapacity, f.NoCluster) {
		fmt.Fprintln(w, clitext.Truncate(l, 79))
	}
}

// FarmLines are top --cluster's farm table: each live node's published figures (the demand
// of the shards it holds, the renders per second it measured, the share of them outside the
// cadences, its backlog), the farm's sum, then the verdict and projected age ÷ cadence of the
// sum. A node whose figures are unknown says so and is not in the sum.
func FarmLines(fc *wire.FarmCapacity, noCluster bool) []string {
	if noCluster {
		return []string{"", "farm: this node is in no cluster (store.backend is badger)"}
	}
	if fc == nil {
		return nil
	}
	out := []string{"", fmt.Sprintf("%-16s %6s %10s %10s %7s %9s %9s", "FARM", "SHARDS", "DEMAND/s", "CAPACITY/s", "RETRY", "BACKLOG", "RENDERS")}
	for _, n := range fc.PerNode {
		c := n.Capacity
		if c == nil {
			out = append(out, fmt.Sprintf("%-16s %s", clitext.Truncate(n.ID, 16), "unknown: no figures published (an older version, or not yet)"))
			continue
		}
		out = append(out, fmt.Sprintf("%-16s %6d %10s %10s %6.0f%% %9d %9d", clitext.Truncate(n.ID, 16), c.Shards, rateText(c.DemandPerSecond),
			rateText(c.CapacityPerSecond), 100*(c.RetryShare+c.RecheckShare), c.Backlog, c.Renders))
	}
	sum := &fc.Capacity
	out = append(out, fmt.Sprintf("%-16s %6s %10s %10s %6.0f%% %9d %9d", fmt.Sprintf("sum (%d of %d)", fc.Reporting, fc.Nodes), "",
		rateText(sum.Demand.Total), rateText(sum.Capacity.PerSecond), 100*(sum.Capacity.RetryShare+sum.Capacity.RecheckShare),
		sum.Projection.Backlog, sum.Capacity.Renders))
	if lines := CapacityLines(sum); len(lines) == 3 {
		out = append(out, "farm: "+lines[1], "farm "+lines[2])
	}
	return out
}

// HostLines are top's hosts block: each host held back, how and why, and its renders in
// flight; nothing when no host is held back.
func HostLines(hosts []wire.QueueHost, held int, now time.Time) []string {
	if len(hosts) == 0 {
		return nil
	}
	out := []string{"", fmt.Sprintf("HOSTS held back: %d", held)}
	for _, h := range hosts {
		out = append(out, fmt.Sprintf("%-28s %-16s %-18s %d in flight", clitext.Truncate(h.Host, 28), hostState(h, now), "("+hostWhy(h)+")", h.InFlight))
	}
	if more := held - len(hosts); more > 0 {
		out = append(out, fmt.Sprintf("… and %d more (freshqctl queue --json lists them)", more))
	}
	return out
}

// hostState is "paused 1m20s" (the pause left) or "limit 1/4".
func hostState(h wire.QueueHost, now time.Time) string {
	if h.Paused {
		left := time.UnixMilli(h.PausedUntilMs).Sub(now).Round(time.Second)
		return "paused " + clitext.Duration(max(left, 0))
	}
	return fmt.Sprintf("limit %d/%d", h.Limit, h.Max)
}

// hostWhy names what put the host in its state: the answer that paused it, or the errors that
// lowered its limit.
func hostWhy(h wire.QueueHost) string {
	switch {
	case h.Cause == "retry_after":
		return fmt.Sprintf("%d Retry-After", h.Status)
	case h.Cause == "errors" && h.Status == 0:
		return "timeouts"
	case h.Cause == "errors":
		return fmt.Sprintf("%dxx", h.Status/100)
	}
	return h.Cause
}

// HeldBack is the first shownHosts hosts of hosts that are held back, and how many are.
func HeldBack(hosts []wire.QueueHost) ([]wire.QueueHost, int) {
	var out []wire.QueueHost
	n := 0
	for i := range hosts {
		if hosts[i].HeldBack() {
			n++
			if len(out) < shownHosts {
				out = append(out, hosts[i])
			}
		}
	}
	return out, n
}

// FreshnessLine is top's measure of requests served stale, beside the projected age ÷ cadence
// of CapacityLines: empty until a request was counted.
func FreshnessLine(f *wire.QueueFreshness) string {
	if f == nil || f.ServedRequests <= 0 {
		return ""
	}
	return fmt.Sprintf("served stale %.1f%% of %.0f crawler requests (policy %s)", 100*f.StaleShare, f.ServedRequests, f.Policy)
}

// FarmLine says how this node shares the hosts' limits with the cluster's live nodes: empty on
// a node alone.
func FarmLine(f *wire.QueueFarm) string {
	switch {
	case f == nil:
		return ""
	case f.Nodes == 0:
		return "farm: this node holds no share of any host's limit (not among the live nodes yet)"
	}
	return fmt.Sprintf("farm: node %d of %d live nodes, each host's limit divided among them", f.Index+1, f.Nodes)
}

// CapacityLines are top's capacity header: capacity against demand, the verdict, and the
// projected age ÷ cadence of the lanes with demand.
func CapacityLines(c *wire.Capacity) []string {
	if c == nil {
		return nil
	}
	line := "capacity " + rateText(c.Capacity.PerSecond) + "/s"
	if out := c.Capacity.RetryShare + c.Capacity.RecheckShare; out > 0 {
		line += fmt.Sprintf(" (%.0f%% retries/rechecks)", 100*out)
	}
	line += "  demand " + rateText(c.Demand.Total) + "/s"
	verdict := c.Projection.Verdict
	if c.Projection.DrainSeconds > 0 {
		verdict += ", backlog drains in " + clitext.Duration(time.Duration(c.Projection.DrainSeconds*float64(time.Second)).Round(time.Second))
	}
	proj := "projected × cadence:"
	for _, l := range clitext.Lanes(mapKeys(c.Projection.ByLane)) {
		if c.Demand.ByLane[l] > 0 {
			proj += fmt.Sprintf(" %s %.2f", l, c.Projection.ByLane[l])
		}
	}
	return []string{line, verdict, proj}
}

func mapKeys(m map[string]float64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k := range m {
		out[k] = 0
	}
	return out
}

// rateText is a rate with three significant digits below 1/s (a small farm's demand is
// thousandths of a render a second) and one decimal above.
func rateText(v float64) string {
	if v >= 1 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
