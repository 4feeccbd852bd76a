package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/freshq/freshq/config"
)

// Helpers shared by the golden scripts under testdata/ (apply_golden_test.go,
// select_golden_test.go). The scripts are datadriven files: a directive, its input, "----", and
// the output the code must produce. `go test ./policy -rewrite` rewrites every output from the
// code as it is; review the diff before committing it.
//
// Times in the scripts are relative to the script's start (now, below), written as durations
// with days: +0, +90s, +6h, +1d2h, -3h. A whole number of days above two prints as days (7d),
// anything else in hours and below (48h, 1h30m), so a reader can check the arithmetic by hand.

var durPart = regexp.MustCompile(`^(\d+)(ms|d|h|m|s)`)

var unitMs = map[string]int64{"ms": 1, "s": 1000, "m": 60_000, "h": hour, "d": 24 * hour}

// parseDur reads "1d2h30m", "90s", "0" (no sign) into ms.
func parseDur(s string) (int64, error) {
	if s == "0" {
		return 0, nil
	}
	var ms int64
	for rest := s; rest != ""; {
		m := durPart.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("duration %q: want a sequence of <n><unit>, unit one of d h m s ms", s)
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		ms += n * unitMs[m[2]]
		rest = rest[len(m[0]):]
	}
	return ms, nil
}

// parseRel reads a time relative to the script's start: "+6h", "-3h", "+0".
func parseRel(s string) (int64, error) {
	if s == "" || (s[0] != '+' && s[0] != '-') {
		return 0, fmt.Errorf("time %q: want +<duration> or -<duration>", s)
	}
	d, err := parseDur(s[1:])
	if s[0] == '-' {
		d = -d
	}
	return d, err
}

// fmtDur prints ms the way parseDur reads it.
func fmtDur(ms int64) string {
	if ms == 0 {
		return "0"
	}
	day := 24 * hour
	if ms%day == 0 && ms > 2*day {
		return fmt.Sprintf("%dd", ms/day)
	}
	var b strings.Builder
	for _, u := range []struct {
		name string
		ms   int64
	}{{"d", day}, {"h", hour}, {"m", 60_000}, {"s", 1000}, {"ms", 1}} {
		if u.name == "d" && ms < 3*day {
			continue // 24h and 48h read better than 1d and 2d beside the ladder's rungs
		}
		if n := ms / u.ms; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			ms -= n * u.ms
		}
	}
	return b.String()
}

// fmtRel prints a time relative to the script's start.
func fmtRel(ms int64) string {
	if ms < 0 {
		return "-" + fmtDur(-ms)
	}
	return "+" + fmtDur(ms)
}

// scriptPolicy compiles the YAML of a `config` directive over the defaults.
func scriptPolicy(t *testing.T, d *datadriven.TestData) *Policy {
	c, err := config.Parse([]byte(d.Input))
	if err != nil {
		d.Fatalf(t, "config: %v", err)
	}
	return newFromConfig(t, c)
}

// durArg reads a duration argument (no sign) of a directive, or def when it is absent.
func durArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	var s string
	if !d.MaybeScanArgs(t, key, &s) {
		return def
	}
	ms, err := parseDur(s)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return ms
}

func TestGoldenDurations(t *testing.T) {
	for _, s := range []string{"0", "1m30s", "1m", "1h30m", "6h", "24h", "48h", "50h", "3d", "14d", "14d1m", "1s500ms"} {
		ms, err := parseDur(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmtDur(ms); got != s {
			t.Errorf("fmtDur(parseDur(%q)) = %q", s, got)
		}
	}
}
