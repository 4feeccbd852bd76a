// Package clitext is how freshqctl writes figures for people: short durations, text cut to a
// column, lanes in their order. Every command and the top frame write through it, so a figure
// reads the same wherever it appears. Pure functions; it imports nothing of freshq.
package clitext

import (
	"fmt"
	"sort"
	"time"
)

// Duration is a short human duration: 6h, 1d12h, 90m, 45s, 350ms.
func Duration(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d == 0:
		s = "0s"
	case d < time.Second:
		s = fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
		if sec := int(d.Seconds()) % 60; sec != 0 {
			s += fmt.Sprintf("%ds", sec)
		}
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d.Hours()))
		if m := int(d.Minutes()) % 60; m != 0 {
			s += fmt.Sprintf("%dm", m)
		}
	default:
		days := int(d.Hours()) / 24
		s = fmt.Sprintf("%dd", days)
		if h := int(d.Hours()) % 24; h != 0 {
			s += fmt.Sprintf("%dh", h)
		}
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Truncate cuts s to n runes with an ellipsis.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// laneOrder is the order lanes are shown in; unknown lanes follow, sorted.
var laneOrder = []string{"urgent", "submitted", "discovered", "cold"}

// Lanes is the lanes of m in the order they are shown: laneOrder, then the others sorted.
func Lanes(m map[string]uint64) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, l := range laneOrder {
		out = append(out, l)
		seen[l] = true
	}
	var extra []string
	for l := range m {
		if !seen[l] {
			extra = append(extra, l)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}
