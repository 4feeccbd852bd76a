package main

import (
	"net/http"
	"strings"
	"testing"
)

// delete sends DELETE /v1/targets with url and device, says what it removed, prints the
// server's JSON with --json, and reads a missing target as a one-line error, exit 1.
func TestDelete(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"DELETE /v1/targets": func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("url") == "https://shop.test/gone" {
			reply(404, `{"error":"no such target","field":"url"}`)(w, r)
			return
		}
		device := q.Get("device")
		if device == "" {
			device = "desktop"
		}
		reply(200, `{"deleted":"`+device+`|`+q.Get("url")+`"}`)(w, r)
	}})
	r := at(t, f.srv, "delete", "https://shop.test/c/a")
	wantExit(t, r, 0, "")
	if r.stdout != "deleted https://shop.test/c/a (desktop)\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = at(t, f.srv, "delete", "https://shop.test/c/a", "--device", "mobile", "--json")
	wantExit(t, r, 0, "")
	if strings.TrimSpace(r.stdout) != `{"deleted":"mobile|https://shop.test/c/a"}` {
		t.Fatalf("--json %q", r.stdout)
	}
	wantExit(t, at(t, f.srv, "delete", "https://shop.test/gone"), 1, "freshqctl: url: no such target")
	wantExit(t, at(t, f.srv, "delete"), 2, "freshqctl delete: missing argument")
	reqs := f.requests()
	if len(reqs) != 3 || reqs[0].method != http.MethodDelete || reqs[0].path != "/v1/targets" ||
		reqs[0].query != "url=https%3A%2F%2Fshop.test%2Fc%2Fa" || reqs[1].query != "device=mobile&url=https%3A%2F%2Fshop.test%2Fc%2Fa" {
		t.Fatalf("requests %+v", reqs)
	}
	// A server without DELETE /v1/targets says so.
	old := newFake(t, map[string]http.HandlerFunc{"GET /v1/targets": reply(200, `{}`)})
	wantExit(t, at(t, old.srv, "delete", "https://shop.test/c/a"), 1, "not available")
}
