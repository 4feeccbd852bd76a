package sim

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/freshq/freshq/config"
)

// ErrInvalidMix wraps every failure to load or validate a Mix.
var ErrInvalidMix = errors.New("sim: invalid mix")

//go:embed default-mix.yaml
var defaultMixYAML []byte

// DefaultMixYAML returns the text of the default mix (sim/default-mix.yaml), comments included.
func DefaultMixYAML() []byte { return append([]byte(nil), defaultMixYAML...) }

// Mix describes a corpus: its size, its route classes and their shares, the backlog it starts
// from and how renders of it turn out. sim/default-mix.yaml is the documented default.
type Mix struct {
	Keys    int      `yaml:"keys"`    // corpus size when the runner is not given one
	Devices []string `yaml:"devices"` // each page exists once per device
	// Sites is the least number of hosts (sN.test) the pages are spread over; there are at
	// least as many as an exact route (the home page) has pages per device. 0: that many.
	Sites   int      `yaml:"sites"`
	Classes []Class  `yaml:"classes"` // in route order: the first matching route wins
	Backlog Backlog  `yaml:"backlog"`
	Render  Outcomes `yaml:"render"`
}

// Class is one route class of the corpus.
type Class struct {
	Name       string    `yaml:"name"`
	Route      RouteSpec `yaml:"route"`
	Share      float64   `yaml:"share"`      // of keys
	Discovered float64   `yaml:"discovered"` // of this class's keys: crawler-found, not submitted
	Visit      float64   `yaml:"visit"`      // P(visited between two renders): moves it on the demand ladder
}

// RouteSpec is the class's route (config.Route without a name: the class names it).
type RouteSpec struct {
	Match    string          `yaml:"match"` // exact | prefix
	Path     string          `yaml:"path"`
	Interval config.Duration `yaml:"interval"` // the route's cadence and ceiling
}

// Backlog is the state the corpus starts in.
type Backlog struct {
	Overdue       float64         `yaml:"overdue"`        // share of keys overdue at the start
	Depth         config.Duration `yaml:"depth"`          // an overdue key is late by U(0, depth)
	NeverRendered float64         `yaml:"never_rendered"` // share of keys never rendered (cold lane), due U(0, depth) ago
}

// Outcomes is how renders turn out.
type Outcomes struct {
	LatencyMedian config.Duration `yaml:"latency_median"`
	LatencySigma  float64         `yaml:"latency_sigma"` // log-normal shape
	Transient     float64         `yaml:"transient"`     // share of attempts failing with a 5xx
	Gone          float64         `yaml:"gone"`          // share of pages answering 410 on every render
	Noindex       float64         `yaml:"noindex"`       // share of pages answering noindex on every render
	// Unscheduled is the share of the farm's render slots spent on renders that no cadence of
	// the corpus asks for (see default-mix.yaml): they are taken off every claim before the
	// queue is asked, so the corpus gets (1 − Unscheduled) of the capacity.
	Unscheduled float64 `yaml:"unscheduled"`
}

// MaxSites bounds Mix.Sites: the simulator measures every host.
const MaxSites = 10_000

// DefaultMix returns the default mix.
func DefaultMix() *Mix {
	m, err := ParseMix(defaultMixYAML)
	if err != nil {
		panic(fmt.Sprintf("sim: the embedded default mix is invalid: %v", err)) // a build defect
	}
	return m
}

// LoadMix reads and validates the mix file at path.
func LoadMix(path string) (*Mix, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: mix: %w", err)
	}
	m, err := ParseMix(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseMix decodes a mix strictly (an unknown key is an error naming its line) and validates it.
func ParseMix(data []byte) (*Mix, error) {
	m := &Mix{}
	if err := yaml.UnmarshalWithOptions(data, m, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidMix, strings.TrimSpace(yaml.FormatError(err, false, false)))
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks that the mix describes a corpus.
func (m *Mix) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidMix, fmt.Sprintf(format, args...))
	}
	unit := func(v float64) bool { return v >= 0 && v <= 1 }
	switch {
	case m.Keys < 1:
		return bad("keys must be positive, got %d", m.Keys)
	case m.Sites < 0 || m.Sites > MaxSites:
		return bad("sites must be 0..%d, got %d", MaxSites, m.Sites)
	case len(m.Devices) == 0:
		return bad("devices: at least one device")
	case len(m.Classes) == 0:
		return bad("classes: at least one class")
	case !unit(m.Backlog.Overdue) || !unit(m.Backlog.NeverRendered) || m.Backlog.Overdue+m.Backlog.NeverRendered > 1:
		return bad("backlog: overdue and never_rendered must be shares that add up to at most 1")
	case m.Backlog.Depth < 0:
		return bad("backlog.depth must not be negative")
	case m.Render.LatencyMedian < 0 || !(m.Render.LatencySigma >= 0 && m.Render.LatencySigma <= 3):
		return bad("render: latency_median must not be negative and latency_sigma must be 0..3")
	case !unit(m.Render.Transient) || !unit(m.Render.Gone) || !unit(m.Render.Noindex) ||
		m.Render.Gone+m.Render.Noindex > 1 || m.Render.Transient >= 1:
		return bad("render: transient, gone and noindex must be shares (gone+noindex ≤ 1, transient < 1)")
	case !(m.Render.Unscheduled >= 0 && m.Render.Unscheduled < 1):
		return bad("render: unscheduled must be a share below 1 (the corpus needs some of the farm), got %v", m.Render.Unscheduled)
	}
	for _, d := range m.Devices {
		if d == "" || strings.ContainsAny(d, "| ") {
			return bad("devices: %q is not a device name", d)
		}
	}
	sum := 0.0
	names := map[string]bool{}
	for i, c := range m.Classes {
		switch {
		case c.Name == "" || names[c.Name]:
			return bad("classes[%d]: a class needs a unique name", i)
		case c.Route.Match != "exact" && c.Route.Match != "prefix":
			return bad("classes[%d].route.match must be exact or prefix, got %q", i, c.Route.Match)
		case !strings.HasPrefix(c.Route.Path, "/"):
			return bad("classes[%d].route.path must start with /", i)
		case c.Route.Interval <= 0:
			return bad("classes[%d].route.interval must be positive", i)
		case !(c.Share > 0 && c.Share <= 1) || !unit(c.Discovered) || !unit(c.Visit):
			return bad("classes[%d]: share must be in (0, 1]; discovered and visit in [0, 1]", i)
		}
		names[c.Name] = true
		sum += c.Share
	}
	if math.Abs(sum-1) > 1e-6 {
		return bad("class shares add up to %v, not 1", sum)
	}
	return nil
}

// Limit is the physical limit at capacity c (a share of the corpus's demand): the mean age ÷
// TTL that no policy can keep every class below at once. Cadence counts from completion, so a
// farm whose renders reach the corpus at r renders for every one its cadences ask for renders
// each page, on average, every 1/r of its cadences. The unscheduled share of the farm's slots
// never reaches the corpus, so r = (1 − unscheduled) × c.
func (m *Mix) Limit(c float64) float64 { return 1 / ((1 - m.Render.Unscheduled) * c) }

// Routes returns the freshq routes of the mix, one per class, in order.
func (m *Mix) Routes() []config.Route {
	rs := make([]config.Route, len(m.Classes))
	for i, c := range m.Classes {
		rs[i] = config.Route{Name: c.Name, Match: c.Route.Match, Path: c.Route.Path, Interval: c.Route.Interval}
	}
	return rs
}

// ladderStationary is the share of renders a page spends on each rung in the long run when it
// is visited between two renders with probability visit: policy moves it one rung faster when
// visited and one slower when not, within the ladder. It is a birth-death chain, so the
// stationary distribution has π[k+1]/π[k] = (1−visit)/visit.
func ladderStationary(rungs int, visit float64) []float64 {
	pi := make([]float64, rungs)
	switch {
	case rungs == 0:
		return pi
	case visit <= 0:
		pi[rungs-1] = 1
		return pi
	case visit >= 1:
		pi[0] = 1
		return pi
	}
	ratio := (1 - visit) / visit
	sum, w := 0.0, 1.0
	for k := range pi {
		pi[k] = w
		sum += w
		w *= ratio
	}
	for k := range pi {
		pi[k] /= sum
	}
	return pi
}
