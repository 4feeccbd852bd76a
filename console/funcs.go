package console

import (
	"fmt"
	"html/template"
	"math"
	"time"
)

var funcs = template.FuncMap{
	"f0":    func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"pct":   func(v float64) string { return fmt.Sprintf("%.1f %%", 100*v) },
	"dur":   func(s float64) string { return human(s) },
	"lanes": func() []string { return Lanes },
	"ops":   func() []string { return []string{"rush", "recache", "delete"} },
	"drain": func(s float64) string {
		if s < 0 {
			return "never"
		}
		return human(s)
	},
	"signed": func(s float64) string {
		if s < 0 {
			return human(-s) + " overdue"
		}
		return "in " + human(s)
	},
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"tsp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	// bar is the width, of 120, of a bar of n out of most.
	"bar": func(n, most uint64) int {
		if most == 0 {
			return 0
		}
		return int(max(1, 120*n/most))
	},
	"ms": func(ms int64) string {
		if ms == 0 {
			return "—"
		}
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05Z")
	},
}

// human is a duration in seconds, in its largest unit.
func human(s float64) string {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return "—"
	case s < 120:
		return fmt.Sprintf("%.0f s", s)
	case s < 7200:
		return fmt.Sprintf("%.0f min", s/60)
	case s < 172800:
		return fmt.Sprintf("%.1f h", s/3600)
	default:
		return fmt.Sprintf("%.1f d", s/86400)
	}
}
