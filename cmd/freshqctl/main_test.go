package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// result is one run of the CLI in-process.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs freshqctl in-process with env and stdin; tests pass --server themselves or use env.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb strings.Builder
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] }, terminals{})
	return result{out.String(), errb.String(), code}
}

// at runs the CLI against srv.
func at(t *testing.T, srv *httptest.Server, args ...string) result {
	t.Helper()
	return cli(t, map[string]string{"FRESHQ_SERVER": srv.URL}, "", args...)
}

// recorded is a request a fake server saw.
type recorded struct {
	method, path, query, body, auth, ctype string
}

// fake is an API server answering from handlers, recording requests.
type fake struct {
	mu   sync.Mutex
	reqs []recorded
	srv  *httptest.Server
}

func newFake(t *testing.T, routes map[string]http.HandlerFunc) *fake {
	f := &fake{}
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			f.mu.Lock()
			f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Authorization"), r.Header.Get("Content-Type")})
			f.mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			h(w, r)
		})
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func reply(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// fits checks every line fits an 80-column terminal.
func fits(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
}

func wantExit(t *testing.T, r result, code int, stderrHas string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	if stderrHas != "" {
		if !strings.Contains(r.stderr, stderrHas) {
			t.Fatalf("stderr %q does not say %q", r.stderr, stderrHas)
		}
		if strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") != 0 {
			t.Fatalf("stderr is more than one line: %q", r.stderr)
		}
	}
}

func TestUsage(t *testing.T) {
	f := newFake(t, nil)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, ""},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"add"}, 2, "freshqctl add: missing argument"},
		{[]string{"add", "https://a.test/", "https://b.test/"}, 2, `unexpected argument "https://b.test/"`},
		{[]string{"add", "--nope", "https://a.test/"}, 2, "flag provided but not defined: -nope"},
		{[]string{"prioritize", "https://a.test/"}, 2, "--mode must be rush or wait"},
		{[]string{"prioritize", "--mode", "rush"}, 2, "give one URL or --prefix P"},
		{[]string{"prioritize", "--mode", "rush", "--prefix", "https://a.test/", "https://a.test/x"}, 2, "give one URL or --prefix P"},
		{[]string{"import", "x", "--format", "xml"}, 2, ""},
		{[]string{"import", "-", "--chunk", "0"}, 2, "--chunk must be between"},
		{[]string{"top", "--interval", "1ms"}, 2, "--interval must be at least"},
		{[]string{"queue", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"sitemap"}, 2, "give a sitemap URL"},
		{[]string{"--timeout", "0s", "queue"}, 2, "--timeout must be positive"},
		{[]string{"-h"}, 0, ""},
		{[]string{"help"}, 0, ""},
		{[]string{"add", "-h"}, 0, ""},
	} {
		r := at(t, f.srv, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.err) {
			t.Errorf("%v: exit %d stderr %q, want exit %d saying %q", c.args, r.code, r.stderr, c.code, c.err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("usage errors sent %d requests", n)
	}
	r := at(t, f.srv, "add", "-h")
	if !strings.Contains(r.stdout, "--interval") || !strings.Contains(r.stdout, "--server") {
		t.Fatalf("add -h:\n%s", r.stdout)
	}
	fits(t, r.stdout)
	r = at(t, f.srv, "-h")
	for _, c := range commands {
		if !strings.Contains(r.stdout, c.name) {
			t.Fatalf("usage lacks %s:\n%s", c.name, r.stdout)
		}
	}
	fits(t, r.stdout)
}

func TestAdd(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/targets": reply(200, `{"accepted":1,"rejected":0}`)})
	// Flags before and after the URL, global flags after the command.
	r := cli(t, nil, "", "add", "--device", "mobile", "https://shop.test/c/a", "--interval", "6h", "--source", "sitemap", "--server", f.srv.URL)
	wantExit(t, r, 0, "")
	if r.stdout != "accepted https://shop.test/c/a (mobile)\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = at(t, f.srv, "add", "https://shop.test/c/b", "--interval", "3600", "--due", "2026-11-30T12:00:00Z", "--json")
	wantExit(t, r, 0, "")
	if strings.TrimSpace(r.stdout) != `{"accepted":1,"rejected":0}` {
		t.Fatalf("--json stdout %q", r.stdout)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var a, b map[string]any
	json.Unmarshal([]byte(reqs[0].body), &a)
	json.Unmarshal([]byte(reqs[1].body), &b)
	if a["url"] != "https://shop.test/c/a" || a["device"] != "mobile" || a["interval"] != "6h" || a["source"] != "sitemap" {
		t.Fatalf("first item %v", a)
	}
	if b["interval"] != 3600.0 || b["due"] != "2026-11-30T12:00:00Z" || b["device"] != nil {
		t.Fatalf("second item %v", b)
	}
	if reqs[0].ctype != "application/x-ndjson" || reqs[0].method != "POST" {
		t.Fatalf("request %+v", reqs[0])
	}
}

func TestAddRejected(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/targets": reply(400,
		`{"accepted":0,"rejected":1,"errors":[{"index":0,"field":"interval","error":"unparsable duration (use e.g. 6h, 7d, 90m)"}]}`)})
	r := at(t, f.srv, "add", "https://shop.test/", "--interval", "soon")
	wantExit(t, r, 1, "")
	if r.stderr != "freshqctl: interval: unparsable duration (use e.g. 6h, 7d, 90m)\n" {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = at(t, f.srv, "add", "https://shop.test/", "--interval", "soon", "--json")
	wantExit(t, r, 1, "")
	var resp wire.TargetsResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.Rejected != 1 {
		t.Fatalf("--json stdout %q: %v", r.stdout, err)
	}
}

func TestServerErrors(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/targets": reply(404, `{"error":"no such target","field":"url"}`),
		"GET /v1/queue":   reply(500, `{"error":"store: closed"}`),
		"POST /v1/targets": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream exploded", http.StatusBadGateway)
		},
		"GET /metrics": reply(401, `{"error":"missing bearer token"}`),
	})
	r := at(t, f.srv, "explain", "https://shop.test/nope")
	wantExit(t, r, 1, "")
	if r.stderr != "freshqctl: url: no such target\n" {
		t.Fatalf("stderr %q", r.stderr)
	}
	wantExit(t, at(t, f.srv, "explain", "https://shop.test/nope", "--json"), 1, "freshqctl: url: no such target")
	wantExit(t, at(t, f.srv, "queue"), 1, "freshqctl: store: closed")
	wantExit(t, at(t, f.srv, "add", "https://shop.test/"), 1, "POST /v1/targets: 502 Bad Gateway: upstream exploded")
	wantExit(t, at(t, f.srv, "top", "--once"), 1, "missing bearer token (set --token or FRESHQ_TOKEN)")

	// Nothing listening.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	wantExit(t, at(t, dead, "queue"), 1, "cannot reach "+dead.URL)

	// An endpoint this server does not have.
	for _, args := range [][]string{{"sitemap", "https://shop.test/sitemap.xml"}, {"prioritize", "https://shop.test/", "--mode", "rush"}} {
		r := at(t, f.srv, args...)
		wantExit(t, r, 1, "is not available on "+f.srv.URL)
		if !strings.Contains(r.stderr, "(404)") {
			t.Fatalf("%v: %q", args, r.stderr)
		}
	}
}

func TestTokenAndEnv(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/queue": reply(200, `{}`)})
	r := cli(t, map[string]string{"FRESHQ_SERVER": strings.TrimPrefix(f.srv.URL, "http://") + "/", "FRESHQ_TOKEN": "s3cret"}, "", "queue", "--json")
	wantExit(t, r, 0, "")
	r = cli(t, map[string]string{"FRESHQ_SERVER": "http://127.0.0.1:1", "FRESHQ_TOKEN": "s3cret"}, "", "--server", f.srv.URL, "--token", "other", "queue", "--json")
	wantExit(t, r, 0, "")
	reqs := f.requests()
	if reqs[0].auth != "Bearer s3cret" || reqs[1].auth != "Bearer other" {
		t.Fatalf("auth headers %q, %q", reqs[0].auth, reqs[1].auth)
	}
}

func TestRetriesWhileWorker0Restarts(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/queue": func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n < 3 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":"worker 0 is restarting"}`, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"backlog":{"cold":3}}`)
	}})
	r := at(t, f.srv, "queue", "--json")
	wantExit(t, r, 0, "")
	if calls != 3 {
		t.Fatalf("%d calls", calls)
	}
}

const explainJSON = `{"key":"desktop|https://shop.test/c/a","url":"https://shop.test/c/a","device":"desktop","source":"sitemap",
"due_at":"2026-11-30T12:00:00Z","due_in_seconds":-180,"cadence":{"seconds":21600,"origin":"route","route":"catalog"},
"lane":"submitted","score":0.0123,"demand_rung":2,
"lease":{"holder":3,"acquired_at":"2026-11-30T12:02:00Z","expires_at":"2026-11-30T12:12:00Z","released":false},
"failures":{"count":2,"class":"timeout","first_at":"2026-11-30T10:00:00Z","last_at":"2026-11-30T11:00:00Z"},
"terminal":{"state":"gone","recheck_at":"2026-12-07T12:00:00Z"},
"last_render":{"status":504,"at":"2026-11-30T11:00:00Z","duration_ms":60000,"bytes":2048},
"page":{"age_seconds":7200,"age_over_cadence":0.333,"swr_seconds":10800,"servable":true}}`

func TestExplain(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/targets": reply(200, explainJSON)})
	r := at(t, f.srv, "explain", "https://shop.test/c/a", "--device", "mobile")
	wantExit(t, r, 0, "")
	for _, want := range []string{"https://shop.test/c/a", "source sitemap", "overdue by 3m", "6h from route (route catalog), demand rung 2",
		"submitted, score 0.0123", "held since ", ", holder 3, expires ", "2× timeout", "gone", "status 504, 2.0 KiB in 1m", "age 2h = 0.33× cadence, swr 3h, servable"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)
	if q := f.requests()[0].query; q != "device=mobile&url=https%3A%2F%2Fshop.test%2Fc%2Fa" {
		t.Fatalf("query %q", q)
	}
	// A bare target: no lease, no page.
	f2 := newFake(t, map[string]http.HandlerFunc{"GET /v1/targets": reply(200,
		`{"url":"https://shop.test/","device":"desktop","source":"api","due_at":"2026-11-30T12:00:00Z","due_in_seconds":60,"cadence":{"seconds":86400,"origin":"default"},"lane":"cold"}`)})
	r = at(t, f2.srv, "explain", "https://shop.test/")
	for _, want := range []string{"in 1m", "24h from default", "lease        none", "last render  never", "page         none stored"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain lacks %q:\n%s", want, r.stdout)
		}
	}
	r = at(t, f.srv, "explain", "https://shop.test/c/a", "--json")
	var ex wire.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil || ex.Lease.Holder != 3 {
		t.Fatalf("--json: %v %+v", err, ex)
	}
}

func TestQueue(t *testing.T) {
	now := time.Now()
	body := fmt.Sprintf(`{"floor":{"ms":%d,"pinned_key_hash":1234567,"pinned_since_ms":%d,"next_due_ms":%d},
"ready":{"enabled":true,"generation":42,"count":1200,"taken":300,"published_at_ms":%d,"sweep_ms":12.34,"sweep_rows":10000,"sweeps_capped":1,"dropped_long_keys":0},
"backlog":{"urgent":0,"submitted":120,"discovered":40,"cold":7,"weird":1},"below_floor":0,"claims":{"ready":990,"index":10},
"leases":{"Capacity":4096,"Live":3,"Graces":1,"RefusedHeld":2,"RefusedFull":0,"RefusedContended":5,"GracesEvicted":0}}`,
		now.Add(-5*time.Minute).UnixMilli(), now.Add(-90*time.Second).UnixMilli(), now.Add(time.Minute).UnixMilli(), now.Add(-2*time.Second).UnixMilli())
	f := newFake(t, map[string]http.HandlerFunc{"GET /v1/queue": reply(200, body)})
	r := at(t, f.srv, "queue")
	wantExit(t, r, 0, "")
	for _, want := range []string{"FLOOR", "5m ago", "pinned for 1m30s by key hash 000000000012d687", "next due in 1m",
		"generation 42: 1200 entries, 300 taken (25.0%)", "12.3 ms over 10000 rows; 1 capped", "submitted             120",
		"weird                   1", "total                 168", "ready 990 (99.0%), index 10 (1.0%)",
		"3 live, 1 in release grace, capacity 4096", "2 held, 0 full, 5 contended"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("queue lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Index(r.stdout, "urgent") > strings.Index(r.stdout, "cold") {
		t.Errorf("lanes out of order:\n%s", r.stdout)
	}
	fits(t, r.stdout)
	r = at(t, f.srv, "queue", "--json")
	var q wire.QueueView
	if err := json.Unmarshal([]byte(r.stdout), &q); err != nil || q.Leases.Live != 3 || q.Backlog["submitted"] != 120 {
		t.Fatalf("--json: %v %+v", err, q)
	}
}

func TestPrioritize(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{"POST /v1/prioritize": func(w http.ResponseWriter, r *http.Request) {
		var req map[string]string
		json.NewDecoder(r.Body).Decode(&req)
		if req["prefix"] == "https://shop.test/none/" {
			reply(404, `{"error":"no such target","field":"prefix"}`)(w, r)
			return
		}
		fmt.Fprintf(w, `{"mode":%q,"matched":%d}`, req["mode"], len(req["prefix"])+1)
	}})
	r := at(t, f.srv, "prioritize", "https://shop.test/c/a", "--mode", "rush")
	wantExit(t, r, 0, "")
	if r.stdout != "rush https://shop.test/c/a: 1 target, rendering next, at the urgent lane\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = at(t, f.srv, "prioritize", "--prefix", "https://shop.test/c/", "--mode", "wait", "--device", "mobile")
	if r.stdout != "wait https://shop.test/c/*: 21 targets, pages dropped; cadence refills them\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	wantExit(t, at(t, f.srv, "prioritize", "--prefix", "https://shop.test/none/", "--mode", "wait"), 1, "freshqctl: prefix: no such target")
	r = at(t, f.srv, "prioritize", "https://shop.test/c/a", "--mode", "rush", "--json")
	if strings.TrimSpace(r.stdout) != `{"mode":"rush","matched":1}` {
		t.Fatalf("--json %q", r.stdout)
	}
	reqs := f.requests()
	var a, b map[string]string
	json.Unmarshal([]byte(reqs[0].body), &a)
	json.Unmarshal([]byte(reqs[1].body), &b)
	if len(a) != 2 || a["url"] != "https://shop.test/c/a" || a["mode"] != "rush" {
		t.Fatalf("first body %v", a)
	}
	if len(b) != 3 || b["prefix"] != "https://shop.test/c/" || b["mode"] != "wait" || b["device"] != "mobile" {
		t.Fatalf("second body %v", b)
	}
}

// sitemapFake serves a run that is running for `polls` GETs, then ends with final.
func sitemapFake(t *testing.T, polls int, final string) *fake {
	var mu sync.Mutex
	n := 0
	return newFake(t, map[string]http.HandlerFunc{
		"POST /v1/sitemaps": reply(202, `{"id":"r1","status":"running"}`),
		"GET /v1/sitemaps/{id}": func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("id") != "r1" {
				reply(404, `{"error":"no such run","field":"id"}`)(w, r)
				return
			}
			mu.Lock()
			n++
			k := n
			mu.Unlock()
			if k <= polls {
				fmt.Fprintf(w, `{"id":"r1","status":"running","files":1,"urls":%d,"added":{"count":%d}}`, k*10, k*10)
				return
			}
			io.WriteString(w, final)
		},
	})
}

func TestSitemap(t *testing.T) {
	done := `{"id":"r1","status":"done","files":2,"urls":12,"added":{"count":9,"sample":["https://shop.test/1"]},
"updated":{"count":1},"filtered":{"count":1,"sample":["https://evil.test/x"]},"failed":{"count":1,"sample":[{"url":"https://shop.test/bad","reason":"no <loc>"}]}}`
	f := sitemapFake(t, 3, done)
	r := at(t, f.srv, "sitemap", "https://shop.test/sitemap.xml", "--poll", "1ms", "--device", "mobile")
	wantExit(t, r, 0, "")
	for _, want := range []string{"sitemap run r1 done", "2 files, 12 urls: 9 added, 1 updated, 1 filtered, 1 failed",
		"https://shop.test/bad: no <loc>", "https://evil.test/x"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sitemap lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)
	reqs := f.requests()
	if len(reqs) != 5 || reqs[0].body != `{"device":"mobile","url":"https://shop.test/sitemap.xml"}` || reqs[4].path != "/v1/sitemaps/r1" {
		t.Fatalf("requests %+v", reqs)
	}

	// --json prints the final report; a failed run exits 1 with its error.
	f = sitemapFake(t, 0, `{"id":"r1","status":"failed","error":"fetching: 404 Not Found","added":{"count":0}}`)
	r = at(t, f.srv, "sitemap", "https://shop.test/sitemap.xml", "--poll", "1ms", "--json")
	wantExit(t, r, 1, "freshqctl: sitemap run r1 failed: fetching: 404 Not Found")
	var run wire.SitemapRun
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || run.Status != "failed" {
		t.Fatalf("--json %q: %v", r.stdout, err)
	}

	// --detach; --run follows an existing run; an unknown run is an API error.
	f = sitemapFake(t, 0, done)
	r = at(t, f.srv, "sitemap", "https://shop.test/sitemap.xml", "--detach")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "freshqctl sitemap --run r1") {
		t.Fatalf("--detach %q", r.stdout)
	}
	wantExit(t, at(t, f.srv, "sitemap", "--run", "r1"), 0, "")
	wantExit(t, at(t, f.srv, "sitemap", "--run", "zz"), 1, "freshqctl: id: no such run")

	// A local file is posted as the XML body.
	path := filepath.Join(t.TempDir(), "sitemap.xml")
	os.WriteFile(path, []byte("<urlset/>"), 0o600)
	r = at(t, f.srv, "sitemap", path, "--device", "mobile", "--poll", "1ms")
	wantExit(t, r, 0, "")
	reqs = f.requests()
	last := reqs[len(reqs)-2]
	if last.body != "<urlset/>" || last.ctype != "application/xml" || last.query != "device=mobile" {
		t.Fatalf("XML body request %+v", last)
	}
}

func TestSitemapLiveLineOnTTY(t *testing.T) {
	f := sitemapFake(t, 2, `{"id":"r1","status":"done","added":{"count":20}}`)
	var out, errb strings.Builder
	code := run(context.Background(), []string{"--server", f.srv.URL, "sitemap", "https://shop.test/s.xml", "--poll", "1ms"},
		strings.NewReader(""), &out, &errb, func(string) string { return "" }, terminals{stdout: true, stderr: true})
	if code != 0 || !strings.Contains(errb.String(), "\rsitemap run r1: running  1 file, 20 urls: 20 added") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestPrintJSONAddsNewline(t *testing.T) {
	var b strings.Builder
	a := &app{stdout: &b}
	a.printJSON([]byte("{}"))
	if b.String() != "{}\n" {
		t.Fatalf("%q", b.String())
	}
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	if !sc.Scan() {
		t.Fatal("no line")
	}
}
