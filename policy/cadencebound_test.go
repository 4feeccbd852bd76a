package policy

import (
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/store"
)

func policyOf(t *testing.T, yaml string) *Policy {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return newFromConfig(t, c)
}

// CadenceBound is the longest cadence a render may file for a row under the configuration:
// its route's interval, else the target's stored interval, else the ladder's slowest rung, else
// render.default_interval.
func TestCadenceBound(t *testing.T) {
	routed := policyOf(t, "routes:\n  - {name: c, match: prefix, path: /c/, interval: 3m}\n")
	noLadder := policyOf(t, "render: {default_interval: 2h, demand: {ladder: [1h]}}\n")
	for _, tc := range []struct {
		p        *Policy
		key      string
		storedMs int64
		want     int64
	}{
		{routed, "desktop|https://a.test/c/1", 0, 3 * 60_000},
		{routed, "desktop|https://a.test/c/1", 7_200_000, 3 * 60_000},
		{routed, "desktop|https://a.test/x/1", 7_200_000, 7_200_000},
		{routed, "desktop|https://a.test/x/1", 0, 48 * 3_600_000}, // the default ladder's slowest rung
		{noLadder, "desktop|https://a.test/x/1", 0, 3_600_000},
	} {
		r := Row{Key: []byte(tc.key), Row: store.Row{Projection: store.Projection{StoredIntervalMs: tc.storedMs}}}
		if got := tc.p.CadenceBound(&r); got != tc.want {
			t.Errorf("%s stored %d: bound %d, want %d", tc.key, tc.storedMs, got, tc.want)
		}
	}
}

// CadenceKey changes with what CadenceBound depends on, and only with that.
func TestCadenceKey(t *testing.T) {
	base := "routes:\n  - {name: c, match: prefix, path: /c/, interval: 6h}\n"
	k := policyOf(t, base).CadenceKey()
	if policyOf(t, base+"log: {level: debug}\nqueue: {ready: {submitted_boost: 3}}\n").CadenceKey() != k {
		t.Error("a change of no cadence changed the key")
	}
	for _, yaml := range []string{
		"routes:\n  - {name: c, match: prefix, path: /c/, interval: 3m}\n",
		"routes:\n  - {name: c, match: prefix, path: /d/, interval: 6h}\n",
		base + "render: {default_interval: 1h}\n",
		base + "render: {demand: {ladder: [1h, 2h]}}\n",
	} {
		if policyOf(t, yaml).CadenceKey() == k {
			t.Errorf("%q: the key did not change", yaml)
		}
	}
}
