package sim

import (
	"bytes"
	"errors"
	"testing"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
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
