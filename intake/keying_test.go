package intake

import (
	"errors"
	"testing"

	"github.com/freshq/freshq/wire"
)

// Every entry point of Targets builds its key through the key rules of the policy in force:
// one page spelled five ways is one target, found by each of them; a reload that changes the
// rules changes the keys the next request builds.
func TestEntryPointsApplyTheKeyRules(t *testing.T) {
	e, svc := newTargets(t)
	const want = "desktop|https://a.test/c/1?a=1&b=2"
	up := svc.NewUpload()
	if err := up.Add(0, &wire.TargetItem{URL: "HTTPS://A.test:443/c/1?utm_source=n&b=2&a=1#top"}); err != nil {
		t.Fatal(err)
	}
	if err := up.Flush(); err != nil || up.Resp.Rejected != 0 {
		t.Fatalf("upload: %v %+v", err, up.Resp)
	}
	if _, err := e.Store.GetSchedule([]byte(want)); err != nil {
		t.Fatalf("the upload's row is not under %s: %v", want, err)
	}
	key, created, err := svc.Discover("https://a.test/c/1?b=2&gclid=x&a=1", "")
	if err != nil || created || string(key) != want {
		t.Fatalf("discover: %q created=%v %v; want the stored %s", key, created, err, want)
	}
	if n, err := svc.Prioritize(wire.PrioritizeRequest{URL: "https://a.test:443/c/1?a=1&fbclid=1&b=2", Mode: "rush"}); err != nil || n != 1 {
		t.Fatalf("prioritize: %d %v", n, err)
	}
	k, err := Key("https://a.test/c/1?b=2&a=1&_ga=3", "", KeyingOf(svc.Settings()))
	if err != nil || string(k) != want {
		t.Fatalf("Key (delete, explain, pages): %q %v", k, err)
	}
	e.Reload("keys:\n  drop_params: []\n")
	k, err = Key("https://a.test/c/1?b=2&a=1&_ga=3", "", KeyingOf(svc.Settings()))
	if err != nil || string(k) != "desktop|https://a.test/c/1?_ga=3&a=1&b=2" {
		t.Fatalf("Key after a reload to drop_params []: %q %v", k, err)
	}
	if err := svc.Delete(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete of the new rules' key: %v, want ErrNotFound", err)
	}
	if _, err := e.Store.GetSchedule([]byte(want)); err != nil {
		t.Fatalf("the row under the old rules' key: %v (keys check and migrate move it, nothing else)", err)
	}
}

// A prefix is a string prefix of stored keys: it gets only the zero rules, never a route's
// trailing-slash policy or a dropped parameter, which would widen it.
func TestPrefixIsNotTrimmedByRouteRules(t *testing.T) {
	e, svc := newTargets(t)
	e.Reload("routes:\n  - {name: c, match: prefix, path: /c/, trailing_slash: strip}\n")
	up := svc.NewUpload()
	for i, u := range []string{"https://a.test/c/x/", "https://a.test/cx"} {
		if err := up.Add(i, &wire.TargetItem{URL: u}); err != nil {
			t.Fatal(err)
		}
	}
	if err := up.Flush(); err != nil || up.Resp.Rejected != 0 {
		t.Fatalf("upload: %v %+v", err, up.Resp)
	}
	if _, err := e.Store.GetSchedule([]byte("desktop|https://a.test/c/x")); err != nil {
		t.Fatalf("strip did not apply to the upload: %v", err)
	}
	if n, err := svc.Prioritize(wire.PrioritizeRequest{Prefix: "https://a.test/c/", Mode: "rush"}); err != nil || n != 1 {
		t.Fatalf("prefix /c/ matched %d (%v), want 1: not /cx", n, err)
	}
}
