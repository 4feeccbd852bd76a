package renderloop

import (
	"context"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
)

// The conditional checker follows render.* as a reload changes it, as the renderer does: a
// reload that changes render.domains gets a checker of the new allowlist; one that leaves
// render.* alone keeps the checker it has.
func TestConditionalCheckerFollowsAReload(t *testing.T) {
	e := testEnv(t)
	load := func(yaml string) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if err := setConfig(e, cfg); err != nil {
			t.Fatal(err)
		}
	}
	load("render: {domains: [a.test]}\n")
	c := &conditionalCheck{}
	first := c.checkerFor(e)
	load("render: {domains: [a.test]}\nlog: {level: debug}\n")
	if c.checkerFor(e) != first {
		t.Fatal("a reload that left render.* alone rebuilt the checker")
	}
	load("render: {domains: [b.test]}\n")
	if c.checkerFor(e) == first {
		t.Fatal("a reload that changed render.domains kept the checker of the old allowlist")
	}
	_, err := c.checkerFor(e).NotModified(context.Background(), "https://a.test/p", "desktop", `"v1"`, "")
	if err == nil || !strings.Contains(err.Error(), "not in render.domains") {
		t.Fatalf("a check of a domain the reload took out: %v", err)
	}
}
