package intake

import (
	"context"
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
)

// Keys filed before hosts were canonical (a port with leading zeros, a trailing dot, a Unicode
// name, an IPv6 literal in full) are what an upgrade finds: CheckKeys counts them, MigrateKeys
// moves each to its canonical key, and the spellings of one page become one row keeping the
// newest page. A key whose port is no port (outside 1–65535) is counted unkeyable and left
// whole: no page is lost.
func TestMigrateKeysToCanonicalHosts(t *testing.T) {
	e, svc := newTargets(t)
	putKey(t, e.Store, "desktop|http://localhost:018611/same-page", 100, 50)      // one page …
	putKey(t, e.Store, "desktop|http://localhost.:0018611/same-page", 110, 70)    // … its newest copy
	putKey(t, e.Store, "desktop|http://localhost:00000018611/same-page", 120, 60) // … and another
	putKey(t, e.Store, "desktop|https://bücher.example/p", 200, 10)
	putKey(t, e.Store, "desktop|http://[0:0:0:0:0:0:0:1]:08080/", 300, 20)
	putKey(t, e.Store, "desktop|http://localhost:99999/x", 400, 30) // no port: unkeyable
	putKey(t, e.Store, "desktop|http://localhost:8080/ok", 500, 40) // canonical already
	ctx := context.Background()
	c, err := svc.CheckKeys(ctx)
	if err != nil || c.Scanned != 7 || c.Changed != 5 || c.Unkeyable != 1 {
		t.Fatalf("check: %+v %v", c, err)
	}
	m, err := svc.MigrateKeys(ctx, 0)
	if err != nil || !m.Done || m.Moved+m.Kept+m.Replaced != 5 {
		t.Fatalf("migrate: %+v %v", m, err)
	}
	if got := pageBody(t, e.Store, "desktop|http://localhost:18611/same-page"); got != "desktop|http://localhost.:0018611/same-page" {
		t.Fatalf("the one row of the page holds %q, not its newest copy", got)
	}
	for _, k := range []string{"desktop|https://xn--bcher-kva.example/p", "desktop|http://[::1]:8080/", "desktop|http://localhost:8080/ok"} {
		if _, err := e.Store.GetSchedule([]byte(k)); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if got := pageBody(t, e.Store, "desktop|http://localhost:99999/x"); got != "desktop|http://localhost:99999/x" {
		t.Fatalf("the unkeyable key's page: %q", got)
	}
	for _, gone := range []string{"desktop|http://localhost:018611/same-page", "desktop|http://localhost.:0018611/same-page",
		"desktop|http://localhost:00000018611/same-page", "desktop|https://bücher.example/p"} {
		if _, err := e.Store.GetSchedule([]byte(gone)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s is still stored: %v", gone, err)
		}
	}
	if c, err := svc.CheckKeys(ctx); err != nil || c.Scanned != 5 || c.Changed != 0 || c.Unkeyable != 1 {
		t.Fatalf("check after migrate: %+v %v", c, err)
	}
}
