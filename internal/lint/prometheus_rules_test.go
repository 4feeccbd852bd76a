package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// needPromtool finds promtool (Debian's prometheus package); it may be missing locally, never
// in CI.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and promtool is missing: %v", err)
		}
		t.Skipf("no promtool here (%v); apt-get install prometheus", err)
	}
	return p
}

// The alert rules load (promtool check rules) and fire as their unit tests say, at the times
// they say, and not before (promtool test rules).
func TestPrometheusRules(t *testing.T) {
	promtool := needPromtool(t)
	dir := filepath.Join(root(t), "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "freshq-rules.yml"}, {"test", "rules", "freshq-rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every freshq_ series the rules and the Grafana dashboard name is one freshq exports: a
// renamed metric fails here rather than leaving an alert that never fires.
func TestRulesAndDashboardNameExportedSeries(t *testing.T) {
	r := root(t)
	var src strings.Builder
	for _, glob := range []string{"cmd/supervisor/*.go", "shmmetrics/*.go", "serve/*.go"} {
		files, _ := filepath.Glob(filepath.Join(r, glob))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(freshq_[a-z_]+)"`).FindAllStringSubmatch(src.String(), -1) {
		exported[m[1]] = true
	}
	name := regexp.MustCompile(`freshq_[a-z_]+`)
	for _, f := range []string{"deploy/prometheus/freshq-rules.yml", "deploy/grafana/freshq.json"} {
		b, err := os.ReadFile(filepath.Join(r, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			base := n
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				if strings.HasSuffix(n, suf) && !exported[n] {
					base = strings.TrimSuffix(n, suf)
				}
			}
			if !exported[base] && !strings.HasPrefix(n, "freshq_on") {
				t.Errorf("%s names %s, which freshq does not export", f, n)
			}
		}
	}
}

// root is the repository's root: a test runs in its package's directory.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
