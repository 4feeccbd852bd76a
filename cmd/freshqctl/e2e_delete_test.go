package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDeleteAgainstARunningSupervisor drives freshqctl delete against a real supervisor: a
// rendered target is gone after it (explain says so), a second delete is a one-line error, and
// --json prints the server's answer.
func TestDeleteAgainstARunningSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	server := startSupervisor(t, "  domains: [shop.test]\n")
	for _, dev := range []string{"desktop", "mobile"} {
		wantExit(t, ctl(t, server, "", "add", "https://shop.test/c/del", "--device", dev), 0, "")
	}
	waitFor(t, "the target's first render", 20*time.Second, func() bool {
		r := ctl(t, server, "", "explain", "https://shop.test/c/del", "--json")
		return r.code == 0 && strings.Contains(r.stdout, `"last_render"`)
	})

	r := ctl(t, server, "", "delete", "https://shop.test/c/del")
	wantExit(t, r, 0, "")
	if r.stdout != "deleted https://shop.test/c/del (desktop)\n" {
		t.Fatalf("delete: %q", r.stdout)
	}
	wantExit(t, ctl(t, server, "", "explain", "https://shop.test/c/del"), 1, "freshqctl: url: no such target")
	wantExit(t, ctl(t, server, "", "delete", "https://shop.test/c/del"), 1, "freshqctl: url: no such target")
	wantExit(t, ctl(t, server, "", "delete", "https://shop.test/c/del", "--device", "tv"), 1, "freshqctl: device: unknown device tv")

	// The other device's target is its own key, untouched until deleted by name.
	wantExit(t, ctl(t, server, "", "explain", "https://shop.test/c/del", "--device", "mobile"), 0, "")
	r = ctl(t, server, "", "delete", "https://shop.test/c/del", "--device", "mobile", "--json")
	wantExit(t, r, 0, "")
	var out struct{ Deleted string }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || !strings.Contains(out.Deleted, "https://shop.test/c/del") {
		t.Fatalf("delete --json %q: %v", r.stdout, err)
	}
	wantExit(t, ctl(t, server, "", "explain", "https://shop.test/c/del", "--device", "mobile"), 1, "no such target")
}
