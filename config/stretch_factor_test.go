package config

import (
	"strings"
	"testing"
)

// freshness.stretch_factor defaults to 1 (ceilings within ready's longest interval) and is
// refused, by name, outside 1..16.
func TestFreshnessStretchFactor(t *testing.T) {
	c, err := Parse([]byte("freshness: {stretch_factor: 2}\n"))
	if err != nil || c.Freshness.StretchFactor != 2 {
		t.Fatalf("stretch_factor 2: %v, %v", c.Freshness.StretchFactor, err)
	}
	if c, err := Parse([]byte("workers: 2\n")); err != nil || c.Freshness.StretchFactor != 1 {
		t.Fatalf("default: %v, %v", c.Freshness.StretchFactor, err)
	}
	for _, v := range []string{"0.5", "17", "-1"} {
		_, err := Parse([]byte("freshness: {stretch_factor: " + v + "}\n"))
		if err == nil || !strings.Contains(err.Error(), "freshness.stretch_factor") {
			t.Fatalf("stretch_factor %s: %v, want a refusal naming freshness.stretch_factor", v, err)
		}
	}
}
