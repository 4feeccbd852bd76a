package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

func explainKey(t *testing.T, server, url string) (wire.Explanation, bool) {
	t.Helper()
	r := ctl(t, server, "", "explain", url, "--json")
	if r.code != 0 {
		return wire.Explanation{}, false
	}
	var ex wire.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil {
		t.Fatal(err)
	}
	return ex, true
}

// TestKeysCheckAndMigrateAcrossARestart files targets with tracking parameters under a
// configuration that keeps them (keys.drop_params: []), lets them render, and restarts with the
// default key rules. The rendered rows are then out of reach (their URL now names another key)
// until freshqctl keys migrate moves them: keys check counts them, migrate moves them in
// batches (two of them spellings of one page, which keeps one), check then counts none, every
// page is served under its new key, and the moved rows render again under it. No row is lost
// but the duplicate.
func TestKeysCheckAndMigrateAcrossARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const n = 5
	node := newE2ENode(t)
	server, stop := node.start(t, "  domains: [shop.test]\nkeys:\n  drop_params: []\n")
	var nd strings.Builder
	urls := []string{"https://shop.test/c/dup?gclid=1", "https://shop.test/c/dup"}
	for i := range n {
		urls = append(urls, fmt.Sprintf("https://shop.test/c/k-%d?utm_source=news&id=%d", i, i))
	}
	urls = append(urls, "https://shop.test/c/plain?b=2&a=1") // sorted already by the old rules too
	for _, u := range urls {
		fmt.Fprintf(&nd, "{\"url\": %q, \"interval\": \"6h\"}\n", u)
	}
	wantExit(t, ctl(t, server, nd.String(), "import", "-"), 0, "")
	for _, u := range urls {
		waitFor(t, "the first render of "+u, 30*time.Second, func() bool {
			ex, ok := explainKey(t, server, u)
			return ok && ex.Page != nil
		})
	}
	r := ctl(t, server, "", "keys", "check", "--json")
	wantExit(t, r, 0, "")
	var c wire.KeysCheck
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil || c.Scanned != n+3 || c.Changed != 0 {
		t.Fatalf("check under the rules the keys were filed with: %s %v", r.stdout, err)
	}
	stop()

	server, _ = node.start(t, "  domains: [shop.test]\n")
	if _, ok := explainKey(t, server, urls[2]); ok {
		t.Fatalf("%s is found under the new rules before a migrate: the test shows nothing", urls[2])
	}
	r = ctl(t, server, "", "keys", "check")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, fmt.Sprintf("%d keys scanned: %d would change", n+3, n+1)) ||
		!strings.Contains(r.stdout, "desktop|https://shop.test/c/k-0?id=0&utm_source=news\n    → desktop|https://shop.test/c/k-0?id=0") {
		t.Fatalf("keys check:\n%s", r.stdout)
	}
	r = ctl(t, server, "", "keys", "migrate", "--batch", "2", "--json")
	wantExit(t, r, 0, "")
	var m wire.KeysMigrate
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.Moved != n || m.Kept+m.Replaced != 1 || !m.Done {
		t.Fatalf("keys migrate: %s %v", r.stdout, err)
	}
	migrated := time.Now()
	r = ctl(t, server, "", "keys", "check", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &c); err != nil || c.Scanned != n+2 || c.Changed != 0 {
		t.Fatalf("check after migrate: %s %v", r.stdout, err)
	}
	r = ctl(t, server, "", "keys", "migrate")
	wantExit(t, r, 0, "")
	if r.stdout != "migrated 0 keys: 0 moved, 0 dropped for an existing key with a newer page, 0 replaced an older one\n" {
		t.Fatalf("a second keys migrate: %q, want nothing left to move", r.stdout)
	}
	wantExit(t, ctl(t, server, "", "keys", "rekey"), 2, "freshqctl keys: give check or migrate, not \"rekey\"")
	for i, u := range urls[2 : 2+n] {
		ex, ok := explainKey(t, server, u)
		if want := fmt.Sprintf("desktop|https://shop.test/c/k-%d?id=%d", i, i); !ok || ex.Key != want || ex.Page == nil || ex.Cadence.Seconds != 6*3600 {
			t.Fatalf("%s after migrate: %+v, want its row, page and interval under %s", u, ex, want)
		}
		g := ctl(t, server, "", "get", u)
		wantExit(t, g, 0, "")
		if !strings.Contains(g.stdout, "utm_source=news") {
			t.Fatalf("get %s: %q, want the page rendered under the old key, moved", u, g.stdout)
		}
		wantExit(t, ctl(t, server, "", "prioritize", u, "--mode", "rush"), 0, "")
		waitFor(t, "a render of "+u+" under its new key", 30*time.Second, func() bool {
			ex, ok := explainKey(t, server, u)
			return ok && ex.LastRender != nil && ex.LastRender.At.After(migrated.Add(-time.Second)) && ex.LastRender.Status == 200
		})
	}
	if ex, ok := explainKey(t, server, urls[0]); !ok || ex.Key != "desktop|https://shop.test/c/dup" || ex.Page == nil {
		t.Fatalf("the duplicate: %+v %v", ex, ok)
	}
	if ex, ok := explainKey(t, server, urls[len(urls)-1]); !ok || ex.Key != "desktop|https://shop.test/c/plain?a=1&b=2" {
		t.Fatalf("the unchanged key: %+v %v", ex, ok)
	}
}
