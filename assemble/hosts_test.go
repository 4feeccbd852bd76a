package assemble

import (
	"reflect"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
)

// Every render.hosts value politeness uses reaches its limits, and the shortest pause the
// configuration lets max_pause be is the shortest pause a refusal causes.
func TestHostsLimitsCarryEveryValue(t *testing.T) {
	cfg, err := config.Parse([]byte(`
render:
  hosts: {max_concurrency: 7, overrides: {"big.test": 2}, max_pause: 3m, halve_after: 5, grow_after: 11}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := HostsLimits(cfg.Render.Hosts)
	want := hosts.Limits{MaxConcurrency: 7, Overrides: map[string]int{"big.test": 2}, MaxPause: 3 * time.Minute, HalveAfter: 5, GrowAfter: 11}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("hosts limits:\n got %+v\nwant %+v", got, want)
	}
	noZeroField(t, "hosts.Limits", reflect.ValueOf(got))
	if got.Max([]byte("big.test")) != 2 || got.Max([]byte("other.test")) != 7 {
		t.Fatalf("Max: big %d, other %d", got.Max([]byte("big.test")), got.Max([]byte("other.test")))
	}
	if hosts.MinPause != config.HostsMinPause.D() {
		t.Fatalf("hosts.MinPause %s, config.HostsMinPause %s", hosts.MinPause, config.HostsMinPause)
	}
}
