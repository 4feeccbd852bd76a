package main

import (
	"strings"
	"testing"
)

// TestGetAgainstARunningSupervisor drives freshqctl get against a real supervisor: an unknown
// page is a one-line error without --wait, is rendered on miss and printed with it, and is
// then served as stored, the same page, without --wait.
func TestGetAgainstARunningSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	server := startSupervisor(t, "  domains: [shop.test]\n")
	const page = "https://shop.test/c/on-miss"
	wantExit(t, ctl(t, server, "", "get", page), 1, "freshqctl: url: no rendered page")
	r := ctl(t, server, "", "get", page, "--wait", "10s")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "on-miss") {
		t.Fatalf("get --wait: %q, want the rendered page", r.stdout)
	}
	again := ctl(t, server, "", "get", page)
	wantExit(t, again, 0, "")
	if again.stdout != r.stdout {
		t.Fatalf("stored page %q, want the page rendered on miss %q", again.stdout, r.stdout)
	}
	wantExit(t, ctl(t, server, "", "get", page, "--wait", "10m"), 1, "freshqctl: wait: 10m0s: at most 30s (page.max_wait)")
}
