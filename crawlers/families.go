package crawlers

import (
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
)

// The families a claimed crawler is counted under: the label values of family. A table may
// give each its own patterns, never add a name, so the set stays bounded.
const (
	Google      = "google"
	Bing        = "bing"
	Apple       = "apple"
	Yandex      = "yandex"
	Baidu       = "baidu"
	DuckDuckGo  = "duckduckgo"
	OpenAI      = "openai"
	Anthropic   = "anthropic"
	Perplexity  = "perplexity"
	CommonCrawl = "commoncrawl"
	Social      = "social"
	Other       = "other"
	// None is the family of a request whose User-Agent claims no crawler.
	None = "none"
)

// Families are the family names a table may use, in the order views list them.
var Families = []string{Google, Bing, Apple, Yandex, Baidu, DuckDuckGo, OpenAI, Anthropic, Perplexity, CommonCrawl, Social, Other}

// Limits of a table, so that neither the shipped data nor an operator's override can make a
// request's classification cost more than a few hundred substring searches.
const (
	MaxAgents   = 64  // agents of one family
	MaxSuffixes = 16  // reverse_dns suffixes of one family
	MaxRanges   = 512 // ranges of one family
	MaxPattern  = 128 // bytes of one agent pattern or suffix
)

// ErrBadTable matches every refusal of a family table.
var ErrBadTable = errors.New("crawlers: bad family table")

// Spec is one family as the data file (families.yaml) and serve.crawlers give it.
type Spec struct {
	Family     string   `yaml:"family" json:"family"`
	Agents     []string `yaml:"agents" json:"agents"`           // User-Agent substrings, case-insensitive
	ReverseDNS []string `yaml:"reverse_dns" json:"reverse_dns"` // name suffixes, confirmed forward
	Ranges     []string `yaml:"ranges" json:"ranges"`           // CIDRs the family publishes
	// Device, when given, is the device every crawler of the family renders as, whatever
	// the device patterns say of its User-Agent (a name the configuration's devices know).
	Device string `yaml:"device,omitempty" json:"device,omitempty"`
}

// DeviceSpec is one device pattern of the table: a User-Agent that carries one of Agents
// (case-insensitive) and whose family says no device renders as Device.
type DeviceSpec struct {
	Device string   `yaml:"device" json:"device"`
	Agents []string `yaml:"agents" json:"agents"`
}

// Family is one family of a Table.
type Family struct {
	name     string
	agents   []string // lower case
	suffixes []string // lower case, with a leading dot, without a trailing one
	ranges   []netip.Prefix
	device   string // "": the device patterns decide
}

// Name is the family's name, one of Families.
func (f *Family) Name() string { return f.name }

// Device is the device the family's crawlers render as, "" when the table's device patterns
// decide.
func (f *Family) Device() string {
	if f == nil {
		return ""
	}
	return f.device
}

// Verifiable reports whether the family documents a verification the table holds.
func (f *Family) Verifiable() bool { return len(f.suffixes) > 0 || len(f.ranges) > 0 }

// inRanges reports whether a is in one of the family's published ranges.
func (f *Family) inRanges(a netip.Addr) bool {
	for _, p := range f.ranges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// nameMatches reports whether a reverse name ends in one of the family's suffixes (or is the
// suffix's domain itself).
func (f *Family) nameMatches(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	for _, s := range f.suffixes {
		if strings.HasSuffix(name, s) || name == s[1:] {
			return true
		}
	}
	return false
}

// Table is a compiled table of User-Agent patterns: which family a User-Agent claims, and
// which device it renders as. Immutable.
type Table struct {
	families []*Family
	devices  []device
}

type device struct {
	name   string
	agents []string // lower case
}

//go:embed families.yaml
var defaultData []byte

// Default is the table shipped with freshq (families.yaml), compiled once. It panics if that
// data does not compile, which a test rules out.
func Default() *Table { return defaultTable() }

var defaultTable = sync.OnceValue(func() *Table {
	t, err := Parse(defaultData)
	if err != nil {
		panic(err)
	}
	return t
})

// DefaultSpecs are the shipped table's families, as data.
func DefaultSpecs() []Spec {
	specs, _, err := decode(defaultData)
	if err != nil {
		panic(err)
	}
	return specs
}

// DefaultDevices are the shipped table's device patterns, as data.
func DefaultDevices() []DeviceSpec {
	_, devices, err := decode(defaultData)
	if err != nil {
		panic(err)
	}
	return devices
}

// Parse compiles a table from its YAML (or JSON) form: {families: [Spec…], devices:
// [DeviceSpec…]}. It never panics, whatever the input (fuzzed); every refusal matches
// ErrBadTable.
func Parse(data []byte) (*Table, error) {
	specs, devices, err := decode(data)
	if err != nil {
		return nil, err
	}
	return New(specs, devices...)
}

func decode(data []byte) ([]Spec, []DeviceSpec, error) {
	var doc struct {
		Families []Spec       `yaml:"families"`
		Devices  []DeviceSpec `yaml:"devices"`
	}
	if err := yaml.UnmarshalWithOptions(data, &doc, yaml.Strict()); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadTable, err)
	}
	return doc.Families, doc.Devices, nil
}

// New compiles specs and devices, each in match order. A family name is one of Families and
// appears once; a family has 1..MaxAgents agents, each non-blank and at most MaxPattern bytes;
// reverse_dns suffixes are domain names (a leading dot is added when missing); ranges are
// CIDRs; a device, a family's or a pattern's, is a name of at most MaxPattern bytes without
// blanks or '|' (a key's separator). A device pattern lists at most MaxAgents agents, each
// non-blank and at most MaxPattern bytes; one that lists none matches nothing.
func New(specs []Spec, devices ...DeviceSpec) (*Table, error) {
	t := &Table{}
	seen := map[string]bool{}
	for i, s := range specs {
		where := fmt.Sprintf("families[%d]", i)
		if !slices.Contains(Families, s.Family) {
			return nil, fmt.Errorf("%w: %s.family %q is not one of %s", ErrBadTable, where, s.Family, strings.Join(Families, ", "))
		}
		if seen[s.Family] {
			return nil, fmt.Errorf("%w: %s.family %q is given twice", ErrBadTable, where, s.Family)
		}
		seen[s.Family] = true
		f := &Family{name: s.Family}
		if len(s.Agents) == 0 || len(s.Agents) > MaxAgents {
			return nil, fmt.Errorf("%w: %s.agents must list 1..%d User-Agent substrings, got %d", ErrBadTable, where, MaxAgents, len(s.Agents))
		}
		for j, a := range s.Agents {
			if strings.TrimSpace(a) == "" || len(a) > MaxPattern {
				return nil, fmt.Errorf("%w: %s.agents[%d] must be non-blank and at most %d bytes", ErrBadTable, where, j, MaxPattern)
			}
			f.agents = append(f.agents, strings.ToLower(a))
		}
		if len(s.ReverseDNS) > MaxSuffixes {
			return nil, fmt.Errorf("%w: %s.reverse_dns lists %d suffixes, at most %d", ErrBadTable, where, len(s.ReverseDNS), MaxSuffixes)
		}
		for j, sfx := range s.ReverseDNS {
			d := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(sfx, "."), "."))
			if !DomainSuffix(d) || len(d) > MaxPattern {
				return nil, fmt.Errorf("%w: %s.reverse_dns[%d] %q is not a domain name of two labels or more", ErrBadTable, where, j, sfx)
			}
			f.suffixes = append(f.suffixes, "."+d)
		}
		if len(s.Ranges) > MaxRanges {
			return nil, fmt.Errorf("%w: %s.ranges lists %d ranges, at most %d", ErrBadTable, where, len(s.Ranges), MaxRanges)
		}
		for j, r := range s.Ranges {
			p, err := netip.ParsePrefix(strings.TrimSpace(r))
			if err != nil {
				return nil, fmt.Errorf("%w: %s.ranges[%d]: %v", ErrBadTable, where, j, err)
			}
			f.ranges = append(f.ranges, p.Masked())
		}
		if s.Device != "" && !deviceName(s.Device) {
			return nil, fmt.Errorf("%w: %s.device %q is not a device name", ErrBadTable, where, s.Device)
		}
		f.device = s.Device
		t.families = append(t.families, f)
	}
	for i, d := range devices {
		where := fmt.Sprintf("devices[%d]", i)
		if !deviceName(d.Device) {
			return nil, fmt.Errorf("%w: %s.device %q is not a device name", ErrBadTable, where, d.Device)
		}
		if len(d.Agents) > MaxAgents {
			return nil, fmt.Errorf("%w: %s.agents lists %d User-Agent substrings, at most %d", ErrBadTable, where, len(d.Agents), MaxAgents)
		}
		dv := device{name: d.Device}
		for j, a := range d.Agents {
			if strings.TrimSpace(a) == "" || len(a) > MaxPattern {
				return nil, fmt.Errorf("%w: %s.agents[%d] must be non-blank and at most %d bytes", ErrBadTable, where, j, MaxPattern)
			}
			dv.agents = append(dv.agents, strings.ToLower(a))
		}
		t.devices = append(t.devices, dv)
	}
	return t, nil
}

// deviceName reports whether d can name a device: non-blank, at most MaxPattern bytes, no
// space, control character or '|'. Whether the configuration knows it is the caller's check.
func deviceName(d string) bool {
	if d == "" || len(d) > MaxPattern {
		return false
	}
	for _, c := range d {
		if c <= ' ' || c == '|' || c == 0x7f {
			return false
		}
	}
	return true
}

// DomainSuffix reports whether d is a lower-case domain name of two labels or more, letters,
// digits and hyphens: a suffix of one label (".com") would let any name of the TLD verify.
// The configuration checks serve.crawlers' suffixes with it, so a table it accepts is one New
// accepts.
func DomainSuffix(d string) bool {
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// maxUA bounds the part of a User-Agent searched: crawlers name themselves early, and a
// request cannot make classification cost more than this many bytes a pattern.
const maxUA = 512

// Match is the family a User-Agent claims: the first whose agents it contains
// (case-insensitive), or nil (family None).
func (t *Table) Match(ua string) *Family {
	if t == nil || ua == "" {
		return nil
	}
	if len(ua) > maxUA {
		ua = ua[:maxUA]
	}
	l := strings.ToLower(ua)
	for _, f := range t.families {
		for _, a := range f.agents {
			if strings.Contains(l, a) {
				return f
			}
		}
	}
	return nil
}

// Device is the device a User-Agent of family f (Match's; nil: none) renders as: f's own when
// the table gives it one, else the first device pattern one of whose agents the User-Agent
// carries (case-insensitive, its first 512 bytes searched), else "" (the caller's default).
func (t *Table) Device(f *Family, ua string) string {
	if d := f.Device(); d != "" {
		return d
	}
	if t == nil || ua == "" {
		return ""
	}
	if len(ua) > maxUA {
		ua = ua[:maxUA]
	}
	l := strings.ToLower(ua)
	for _, d := range t.devices {
		for _, a := range d.agents {
			if strings.Contains(l, a) {
				return d.name
			}
		}
	}
	return ""
}

// Name is f's name, None for nil.
func Name(f *Family) string {
	if f == nil {
		return None
	}
	return f.name
}
