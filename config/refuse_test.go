package config

import (
	"errors"
	"strings"
	"testing"
)

// An explicit value that cannot work is refused with its line, never replaced by the default
// the key would get if it were absent.
func TestExplicitZeroAndBadValuesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"workers: 0\n", "line 1: workers"},
		{"data_dir: \"\"\n", "line 1: data_dir"},
		{"listen: \"\"\n", "line 1: listen"},
		{"\nqueue:\n  lease_ttl: 0s\n", "line 3: queue.lease_ttl"},
		{"queue:\n  max_leases: 0\n", "line 2: queue.max_leases"},
		{"queue:\n  release_grace: 0s\n", "line 2: queue.release_grace"},
		{"queue:\n  ready:\n    capacity: 0\n", "line 3: queue.ready.capacity"},
		{"queue:\n  ready:\n    key_capacity: 0\n", "line 3: queue.ready.key_capacity"},
		{"queue:\n  ready:\n    sweep_interval: 0s\n", "line 3: queue.ready.sweep_interval"},
		{"render:\n  timeout: 0s\n", "line 2: render.timeout"},
		{"sitemap:\n  refetch: 30s\n", "line 2: sitemap.refetch"},
		{"sitemap:\n  urls: [\"ftp://shop.test/sitemap.xml\"]\n", "line 2: sitemap.urls[0]"},
		{"render:\n  max_body: 0\n", "line 2: render.max_body"},
		{"render:\n  concurrency: -1\n", "line 2: render.concurrency"}, // 0 is a setting: derived from the cores
		{"render:\n  renderer: \"\"\n", "line 2: render.renderer"},
		{"render:\n  failure_retry:\n    factor: 0\n", "line 3: render.failure_retry.factor"},
		{"render:\n  suppression:\n    gone:\n      strikes: 0\n", "line 4: render.suppression.gone.strikes"},
		{"render:\n  demand:\n    ladder: []\n", "line 3: render.demand.ladder"},
		{"sitemap:\n  max_decompressed: 0\n", "line 2: sitemap.max_decompressed"},
		{"supervisor:\n  shutdown_timeout: 0s\n", "line 2: supervisor.shutdown_timeout"},
		{"supervisor:\n  restart_intensity: 0\n", "line 2: supervisor.restart_intensity"},
		{"render:\n  sim:\n    latency_median: -1s\n", "line 3: render.sim.latency_median"},
		{"render:\n  failure_retry:\n    max_backoff: 1d-23h\n", "[3:"},
		{"render:\n  user_agents:\n    \"mob|ile\": freshq/1\n", "line 3: render.user_agents"},
		{"render:\n  max_body: 33MiB\n", "line 2: render.max_body"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}

// A zero that is a real setting is kept, not defaulted: urgent_max_share 0 means "urgent rows
// get no reserved share".
func TestMeaningfulZeroIsKept(t *testing.T) {
	c, err := Parse([]byte("queue:\n  lanes: {urgent_max_share: 0}\nrender:\n  max_redirects: 0\n  sim: {seed: 0}\nsitemap:\n  max_depth: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Render.MaxRedirects != 0 || c.Render.Sim.Seed != 0 || c.Sitemap.MaxDepth != 0 || c.Queue.Lanes.UrgentMaxShare != 0 {
		t.Fatalf("explicit zeros replaced: redirects %d, seed %d, depth %d, urgent share %v",
			c.Render.MaxRedirects, c.Render.Sim.Seed, c.Sitemap.MaxDepth, c.Queue.Lanes.UrgentMaxShare)
	}
	d := Default()
	if d.Render.MaxRedirects != 5 || d.Render.Sim.Seed != 1 || d.Sitemap.MaxDepth != 3 || d.Queue.Lanes.UrgentMaxShare != 0.2 {
		t.Fatal("absent keys lost their defaults")
	}
}

// zeroLiteral is the YAML zero of a defaulted field's type.
func zeroLiteral(t *testing.T, field any) string {
	switch field.(type) {
	case *string:
		return `""`
	case *int, *int64, *float64, *ByteSize:
		return "0"
	case *Duration:
		return "0s"
	case *[]Duration:
		return "[]"
	}
	t.Fatalf("no YAML zero for %T", field)
	return ""
}

// Every key marked keepZero, whatever its type, keeps a zero the file sets; and zeroField
// handles every type a defaulted key may have, so a key marked keepZero later cannot fall back
// to its default silently.
func TestEveryKeepZeroKeyKeepsItsZero(t *testing.T) {
	for _, k := range Default().defaulted() {
		zeroField(k.field) // panics on a type it does not handle
		if _, zero := fieldValue(k.field); !zero {
			t.Errorf("%s: zeroField left %T non-zero", k.path, k.field)
		}
		if !k.keepZero {
			continue
		}
		parts := strings.Split(k.path, ".")
		doc := parts[len(parts)-1] + ": " + zeroLiteral(t, k.field)
		for i := len(parts) - 2; i >= 0; i-- {
			doc = parts[i] + ": {" + doc + "}"
		}
		c, err := Parse([]byte(doc + "\n"))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		for _, got := range c.defaulted() {
			if got.path != k.path {
				continue
			}
			if v, zero := fieldValue(got.field); !zero {
				t.Errorf("%s: the file's zero was replaced by %v", doc, v)
			}
		}
	}
}

func TestParseDurationRefusesASignAfterDays(t *testing.T) {
	for _, in := range []string{"1d-23h", "1d+1h", "-1d", "1d 2h"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("%q parsed as %v", in, d)
		}
	}
}

// A reload that changes a key read only at start is refused, naming the key and its line.
func TestReloadRefusesRestartOnlyKeys(t *testing.T) {
	running, err := Parse([]byte("data_dir: /a\nworkers: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"data_dir: /b\nworkers: 3\n", "line 1: data_dir"},
		{"data_dir: /a\nworkers: 4\n", "line 2: workers"},
		{"data_dir: /a\nlisten: 127.0.0.1:9\n", "line 2: listen"},
		{"data_dir: /a\nshm: {path: /dev/shm/x.seg}\n", "line 2: shm.path"},
		{"data_dir: /a\nqueue:\n  max_leases: 8192\n", "line 3: queue.max_leases"},
		{"data_dir: /a\nqueue:\n  ready: {capacity: 10}\n", "line 3: queue.ready.capacity"},
		{"data_dir: /a\nqueue:\n  ready: {key_capacity: 512}\n", "line 3: queue.ready.key_capacity"},
		{"data_dir: /a\nrender:\n  concurrency: 2\n", "line 3: render.concurrency"},
		{"data_dir: /a\nstore:\n  sync_writes: true\n", "line 3: store.sync_writes"},
		{"data_dir: /a\nsupervisor:\n  restart_intensity: 9\n", "line 3: supervisor.restart_intensity"},
		{"data_dir: /a\nsupervisor:\n  restart_period: 2m\n", "line 3: supervisor.restart_period"},
		{"data_dir: /a\nsupervisor:\n  ready_timeout: 2m\n", "line 3: supervisor.ready_timeout"},
		{"data_dir: /a\nfreshness:\n  demand_flush: 2m\n", "line 3: freshness.demand_flush"},
	} {
		next, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		err = CheckReload(running, next, []byte(tc.yaml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "restart") {
			t.Errorf("%q: got %v, want a refusal containing %q", tc.yaml, err, tc.want)
		}
	}
	same := []byte("data_dir: /a\nworkers: 3\nlog: {level: debug}\nqueue:\n  ready: {sweep_interval: 5s}\nroutes:\n  - {name: c, match: prefix, path: /c/, interval: 3m}\n")
	next, err := Parse(same)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckReload(running, next, same); err != nil {
		t.Fatalf("a reloadable change refused: %v", err)
	}
}
