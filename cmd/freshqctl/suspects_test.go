package main

import (
	"net/http"
	"strings"
	"testing"
)

// suspects lists the kept suspect renders (of one site with --site), and `suspects accept`
// posts {url, device}; an API error reads as one line naming its field.
func TestSuspects(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/suspects": reply(200, `{"site":"shop.test","suspects":[{"key":"desktop|https://shop.test/p/1","url":"https://shop.test/p/1",`+
			`"device":"desktop","reasons":["exception","text_collapsed"],"at_ms":1,"agree_count":2,"status":200,"bytes":2048}],"kept_bytes":2048}`),
		"POST /v1/suspects/accept": func(w http.ResponseWriter, r *http.Request) {
			f := r.Header.Get("Content-Type")
			if f != "application/json" {
				reply(415, `{"error":"json only"}`)(w, r)
				return
			}
			reply(200, `{"accepted":"desktop|https://shop.test/p/1","reasons":["exception"],"bytes":2048}`)(w, r)
		},
	})
	r := at(t, f.srv, "suspects", "--site", "shop.test")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "https://shop.test/p/1") || !strings.Contains(r.stdout, "exception,text_collapsed") ||
		!strings.Contains(r.stdout, "1 suspect render kept, 2.0 KiB") {
		t.Fatalf("list:\n%s", r.stdout)
	}
	r = at(t, f.srv, "suspects", "accept", "https://shop.test/p/1", "--device", "mobile")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "accepted the suspect render of https://shop.test/p/1") {
		t.Fatalf("accept: %q", r.stdout)
	}
	f.mu.Lock()
	got := f.reqs[len(f.reqs)-1]
	first := f.reqs[0]
	f.mu.Unlock()
	if got.body != `{"url":"https://shop.test/p/1","device":"mobile"}` || first.query != "site=shop.test" {
		t.Fatalf("sent accept %q, list query %q", got.body, first.query)
	}
	wantExit(t, at(t, f.srv, "suspects", "accept"), 2, "")
	g := newFake(t, map[string]http.HandlerFunc{"POST /v1/suspects/accept": reply(404, `{"error":"no such target","field":"url"}`)})
	wantExit(t, at(t, g.srv, "suspects", "accept", "https://shop.test/none"), 1, "freshqctl: url: no such target")
}
