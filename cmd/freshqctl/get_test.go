package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// get prints the page's body as it is, sends --wait as the server reads it (a POST, since a
// render on miss writes and a GET never does), reads a JSON API error as a one-line error (exit
// 1), and a stored page with a status of its own as a page.
func TestGet(t *testing.T) {
	pages := func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Has("wait") != (r.Method == http.MethodPost) {
			reply(400, `{"error":"a wait is sent with POST, a read with GET","field":"wait"}`)(w, r)
			return
		}
		switch q.Get("url") {
		case "https://shop.test/busy":
			w.Header().Set("Retry-After", "1")
			reply(503, `{"error":"100 requests are waiting for renders already (page.max_waiters)"}`)(w, r)
		case "https://shop.test/bad":
			reply(400, `{"error":"\"x\" is not a duration (e.g. 10s)","field":"wait"}`)(w, r)
		case "https://shop.test/gone":
			w.Header().Set("X-Freshq-Stale", "false")
			w.WriteHeader(404)
			io.WriteString(w, "<p>gone</p>")
		default:
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Age", "3")
			w.Header().Set("X-Freshq-Stale", "false")
			io.WriteString(w, "<p>"+q.Get("device")+" "+q.Get("wait")+"</p>")
		}
	}
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/pages": pages, "POST /v1/pages": pages})
	r := at(t, f.srv, "get", "https://shop.test/p/1", "--wait", "10s")
	wantExit(t, r, 0, "")
	if r.stdout != "<p> 10s</p>" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = at(t, f.srv, "get", "https://shop.test/p/1", "--device", "mobile", "--json")
	wantExit(t, r, 0, "")
	var out struct {
		Status      int    `json:"status"`
		Stale       bool   `json:"stale"`
		ContentType string `json:"content_type"`
		Body        string `json:"body"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Status != 200 || out.Body != "<p>mobile </p>" || out.ContentType != "text/html" {
		t.Fatalf("--json %q %v", r.stdout, err)
	}
	wantExit(t, at(t, f.srv, "get", "https://shop.test/busy", "--wait", "5s"), 1,
		"freshqctl: 100 requests are waiting for renders already (page.max_waiters)")
	wantExit(t, at(t, f.srv, "get", "https://shop.test/bad", "--wait", "5s"), 1, "freshqctl: wait: ")
	r = at(t, f.srv, "get", "https://shop.test/gone")
	wantExit(t, r, 0, "the page's own status is 404")
	if r.stdout != "<p>gone</p>" {
		t.Fatalf("stdout %q", r.stdout)
	}
	wantExit(t, at(t, f.srv, "get"), 2, "missing argument")
	wantExit(t, at(t, f.srv, "get", "https://shop.test/p/1", "--wait", "-1s"), 2, "--wait must not be negative")
	if reqs := f.requests(); len(reqs) != 5 || reqs[0].method != http.MethodPost || reqs[0].query != "url=https%3A%2F%2Fshop.test%2Fp%2F1&wait=10s" ||
		reqs[1].method != http.MethodGet {
		t.Fatalf("requests %+v", reqs)
	}
}
