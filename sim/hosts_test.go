package sim

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
)

func TestCorpusHosts(t *testing.T) {
	mix := DefaultMix()
	mix.Sites = 5
	c, err := Generate(mix, 600, 1, testStart, config.Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Hosts) != 5 {
		t.Fatalf("hosts %q, want 5 sites", c.Hosts)
	}
	for i, k := range c.Keys {
		if got := c.Hosts[c.Host[i]]; got != string(cachekey.Host(k)) {
			t.Fatalf("page %d %q: host %q", i, k, got)
		}
	}
	const n = 40
	big, err := c.WithHost(config.Default(), "big.test", bulkClass(mix), n)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 600 || big.Len() != 600+n || len(big.Hosts) != 6 || c.HostIndex("big.test") >= 0 {
		t.Fatalf("with host: %d pages (corpus %d), hosts %q", big.Len(), c.Len(), big.Hosts)
	}
	h := big.HostIndex("big.test")
	for i := 600; i < big.Len(); i++ {
		if int(big.Host[i]) != h || big.DueMs[i] > testStart || big.LastOKMs[i] < 0 ||
			!bytes.HasPrefix(big.Keys[i][bytes.IndexByte(big.Keys[i], '|'):], []byte("|https://big.test/p/")) {
			t.Fatalf("added page %d %q: host %d, due %d, last %d", i, big.Keys[i], big.Host[i], big.DueMs[i], big.LastOKMs[i])
		}
	}
	for i := range 600 {
		if !bytes.Equal(big.Keys[i], c.Keys[i]) || big.Hosts[big.Host[i]] != c.Hosts[c.Host[i]] {
			t.Fatalf("page %d changed: %q on %q", i, big.Keys[i], big.Hosts[big.Host[i]])
		}
	}
	if !(big.DemandPerHour > c.DemandPerHour) {
		t.Errorf("demand %v with the host, %v without", big.DemandPerHour, c.DemandPerHour)
	}
}

func TestMixSitesIsChecked(t *testing.T) {
	for _, bad := range []string{"sites: -1", "sites: 10001"} {
		if _, err := ParseMix(append(DefaultMixYAML(), "\n"+bad+"\n"...)); !errors.Is(err, ErrInvalidMix) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	m, err := ParseMix(append(DefaultMixYAML(), "\nsites: 7\n"...))
	if err != nil || m.Sites != 7 {
		t.Fatalf("sites: 7: %v, %+v", err, m)
	}
}

// fakeBigHost is a politeness result built by hand: two other hosts, each 5 % later with the
// big host than without, and the big host at its limit with 92 % of the due rows.
func fakeBigHost() *BigHostResult {
	b := &BigHostResult{BigHost: BigHost{Host: "big.test", DueShare: 0.9, Limit: 2,
		Scenario: Scenario{Name: "ready+lanes", Mode: policy.ModeLanes, Capacity: 1}},
		Keys: 900, AddedPerHour: 1000, Slots: 10, Sizings: 2,
		Without: &Result{CapacityPerHour: 100}, With: &Result{CapacityPerHour: 1100}}
	for _, n := range []string{"s0.test", "s1.test"} {
		b.Without.Hosts = append(b.Without.Hosts, HostResult{Name: n, Pages: 50, Renders: 100, Ratios: 90, Mean: 1.2, P95: 1.4, MaxInFlight: 3})
	}
	b.With.Hosts = []HostResult{
		{Name: "big.test", Pages: 900, Renders: 500, Ratios: 480, Mean: 3, P95: 4, MaxInFlight: 2, DueShare: 0.92},
		{Name: "s0.test", Pages: 50, Renders: 100, Ratios: 90, Mean: 1.26, P95: 1.5, MaxInFlight: 3},
		{Name: "s1.test", Pages: 50, Renders: 100, Ratios: 90, Mean: 1.26, P95: 1.5, MaxInFlight: 3},
	}
	return b
}

func TestBigHostViolations(t *testing.T) {
	b := fakeBigHost()
	if v := b.Violations(); len(v) != 0 {
		t.Fatalf("violations of a result that keeps the promises: %q", v)
	}
	rep := &Report{Corpus: corpus(t), Options: testOptions(), BigHost: b}
	if sec := rep.HostsSection(); !strings.Contains(sec, "**The promises hold**") ||
		!strings.Contains(sec, "| s0.test | 50 | 100 | 1.20× | 1.40× | 100 | 1.26× | 1.50× | +5.0 % | 3 |") ||
		!strings.Contains(sec, "| **big.test** | 900 |") || !strings.Contains(sec, "**92.0 %**") ||
		!strings.Contains(sec, "held far below its limit") || !strings.Contains(sec, "the second run with it") { // 500 renders in the window: under 7 an hour of 1,000
		t.Errorf("section:\n%s", sec)
	}
	b.SameFarm = &Result{CapacityPerHour: 100, Hosts: []HostResult{
		{Name: "big.test", Renders: 720, Ratios: 700, Mean: 4, MaxInFlight: 2},
		{Name: "s0.test", Renders: 80, Ratios: 70, Mean: 1.5}, {Name: "s1.test", Renders: 80, Ratios: 70, Mean: 1.5}}}
	if sec := rep.HostsSection(); !strings.Contains(sec, "it rendered 10 pages an hour, 10 % of the farm, at most 2 in flight") ||
		!strings.Contains(sec, "was 1.50× against 1.20× without it (+25.0 %") || !strings.Contains(sec, "**The promises hold**") {
		t.Errorf("section with the same farm:\n%s", sec)
	}
	b.With.Hosts[0].MaxInFlight = 3       // above the limit
	b.With.Hosts[0].DueShare = 0.85       // not the share the scenario is about
	b.With.Hosts[2].Mean = 1.2*1.1 + 0.01 // s1 just over 10 % later
	b.With.Hosts[1].Ratios = 0            // s0 not measured at all
	v := strings.Join(b.Violations(), "\n")
	for _, want := range []string{"big.test had 3 renders in flight, above its limit 2", "held 85.0 %",
		"s1.test: mean lateness 1.33× with big.test against 1.20× without (+10.8 %)", "s0.test: no lateness to compare"} {
		if !strings.Contains(v, want) {
			t.Errorf("violations lack %q:\n%s", want, v)
		}
	}
	rep.BigHost = b
	if sec := rep.HostsSection(); !strings.Contains(sec, "**The promises do not hold**") || !strings.Contains(sec, "above its limit 2") {
		t.Errorf("section:\n%s", sec)
	}
}
