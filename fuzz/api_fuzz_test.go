package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/testkit/intaketest"
	"hash/fnv"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// FuzzAPIEndpoints drives worker 0's whole HTTP mux, wired as cmd/worker wires it over a real
// store and segment, with requests made of fuzz input: a method, a path, a query, a
// Content-Type and a body. For every request:
//
//   - no handler panics (a recover names the request) and none takes longer than
//     apiRequestBound;
//   - the status is a valid HTTP code;
//   - every 4xx and 5xx a handler writes is application/json {"error": non-empty, "field"?};
//     POST /v1/targets may instead report its items ({"errors": [...]}, each with an error),
//     as docs/API.md documents. Exempt: the mux's own answers for a path or method nothing is
//     registered for (404, 405, and its path-cleaning redirects), which are net/http's text;
//   - GET /v1/pages changes nothing, whatever it asks and answers (?wait= included);
//   - a 4xx from a write endpoint changed nothing: no schedule row, lease, or the seeded keys'
//     targets and pages moved. POST /v1/pages with ?wait= is one (it files and rushes a
//     missing page); its waits end at once here, as no render runs. POST /v1/targets is exempt when its answer says some items
//     landed before the body broke (accepted > 0), as documented.
//
// The pprof handlers under /internal/debug/pprof/ are not driven: they are net/http/pprof's,
// on worker 0's socket only, and a profile request runs for as many seconds as it asks.
//
// The set-up is once per fuzz process, so state carries from one input to the next (targets
// added, leases taken): an input found failing may need the ones before it to fail again. The
// clock is injected and stands still during a request; it steps apiClockStep between inputs,
// so that leases lapse and rendered rows come due again (frozen, it let the first few claims
// lease every due row, after which no claim could write at all). A body may say $KEY and
// $LEASE for the key and lease of the last job handed out, so that extend, release and results
// reach their paths past the lease check. A body that starts with a NUL byte is built from
// the rest as a JSON object of the API's field names and typical values (see apiJSON), so that
// the fuzzer also writes requests that decode, and reaches what a handler does after decoding.
// Sitemap runs are not waited on: while one is in
// progress (it may write), the store comparison is skipped. Fetches never leave the process:
// the sitemap client's transport refuses at once.
func FuzzAPIEndpoints(f *testing.F) {
	w := newFuzzWorker0(f)
	add := func(method, path, ctype, query, body string) {
		mi, pi, ci := apiIndexOf(apiMethods, method), apiIndexOf(apiPaths, path), apiIndexOf(apiContentTypes, ctype)
		if mi < 0 {
			f.Fatalf("seed method %s is not in the list", method)
		}
		rawPath, rawCT := "", ""
		if pi < 0 {
			pi, rawPath = 0xff, path
		}
		if ci < 0 {
			ci, rawCT = 0xff, ctype
		}
		f.Add(uint8(mi), uint8(pi), uint8(ci), rawPath, query, rawCT, []byte(body))
	}
	// addJSON seeds a JSON body whole, cut in half, and cut just before its end, as a dropped
	// connection leaves it.
	addJSON := func(path, body string) {
		add("POST", path, "application/json", "", body)
		add("POST", path, "application/json", "", body[:len(body)/2])
		add("POST", path, "application/json", "", body[:len(body)-2])
	}
	add("GET", "/v1/targets", "", "url=https://a.test/c/0&device=desktop", "")
	add("GET", "/v1/targets", "", "url=%zz&device=", "")
	add("DELETE", "/v1/targets", "", "url=https://a.test/c/3", "")
	add("DELETE", "/v1/targets", "", "url=https://a.test/c/3&device=watch", "")
	add("GET", "/v1/pages", "", "url=https://a.test/c/0", "")
	add("GET", "/v1/pages", "", "url=", "")
	// Render on miss: a served page, a miss (rushed, then the wait ends at once: 504), and
	// every bad wait (400 naming wait, nothing filed).
	add("POST", "/v1/pages", "", "url=https://a.test/c/0&wait=10s", "")
	add("POST", "/v1/pages", "", "url=https://a.test/w/new&wait=1s&device=mobile", "")
	add("POST", "/v1/pages", "", "url=https://other.test/w/new&wait=1s", "")
	add("GET", "/v1/pages", "", "url=https://a.test/w/get&wait=1s", "")
	add("POST", "/recache", "application/json", "", `{"prerenderToken": "t", "urls": ["https://a.test/r/1", "ftp://x"]}`)
	add("POST", "/recache", "application/json", "", `{"url": "https://a.test/r/2"}`)
	// All or nothing: a key over the store's limit, or a host render.domains does not name,
	// after a valid URL refuses the whole list (and, a 4xx, must have changed nothing).
	add("POST", "/recache", "application/json", "", `{"urls": ["https://a.test/r/3", "https://a.test/r/`+strings.Repeat("x", store.MaxKeyLen)+`"]}`)
	add("POST", "/recache", "application/json", "", `{"urls": ["https://a.test/r/4", "https://other.test/r/4"]}`)
	for _, wait := range []string{"", "abc", "0s", "-1s", "31s", "1h", "1e309s", "9223372036854775807ns", "10", "1s&wait=2s", "%zz"} {
		add("POST", "/v1/pages", "", "url=https://a.test/w/bad&wait="+wait, "")
	}
	add("POST", "/v1/pages", "", "url=https://a.test/w/dev&device=watch&wait=1s", "")
	add("POST", "/v1/pages", "", "url=javascript:alert(1)&wait=1s", "")
	add("GET", "/v1/queue", "", "", "")
	add("GET", "/v1/keys/check", "", "", "")
	add("POST", "/v1/keys/migrate", "application/json", "", `{"limit": 2}`)
	add("POST", "/v1/keys/migrate", "application/json", "", `{"limit": -1}`)
	add("POST", "/v1/keys/migrate", "application/json", "", `{"limit": 1e9, "x": 1}`)
	add("POST", "/v1/keys/migrate", "", "", "")
	add("POST", "/v1/targets", "application/json", "", `[{"url": "https://a.test/k/1?utm_source=x&b=1&a=2#f"}]`)
	add("HEAD", "/v1/queue", "", "", "")
	addJSON("/v1/targets", `[{"url": "https://a.test/f/1", "device": "mobile", "interval": "6h", "source": "sitemap"}, {"url": "https://a.test/f/2", "due": "2027-02-01T00:00:00Z"}]`)
	add("POST", "/v1/targets", "text/plain", "", "{\"url\": \"https://a.test/f/3\"}\n{\"url\": \"https://a.test/f/4\", \"interval\": 3600}\n")
	add("POST", "/v1/targets", "", "", `[{"url": "ftp://a.test/"}, {"url": "https://a.test/", "colour": 1}]`)
	add("POST", "/v1/targets", "application/json", "", `[{"url": "https://a.test/f/5"}] trailing`)
	addJSON("/v1/discover", `{"url": "https://a.test/new", "device": "mobile"}`)
	add("POST", "/v1/discover", "application/json", "", `{"url": "javascript:alert(1)"}`)
	addJSON("/v1/prioritize", `{"url": "https://a.test/c/1", "mode": "rush"}`)
	add("POST", "/v1/prioritize", "application/json", "", `{"prefix": "https://a.test/c/", "mode": "wait"}`)
	add("POST", "/v1/prioritize", "application/json", "", `{"url": "https://a.test/c/1", "prefix": "https://a.test/", "mode": "rush"}`)
	addJSON("/v1/claim", `{"limit": 2, "lease": "2m", "renderer": "farm-eu"}`)
	addJSON(wire.PathValidators, `{"key": $KEY}`)
	add("POST", wire.PathValidators, "application/json", "", `{"key": "ZGVza3RvcHxodHRwczovL2EudGVzdC9jLzA="}`)
	add("POST", "/v1/claim", "application/json", "", `{"limit": 0, "lease": "1s", "renderer": "FARM!"}`)
	addJSON("/v1/leases/extend", `{"key": $KEY, "lease": $LEASE, "ttl": "5m"}`)
	add("POST", "/v1/leases/extend", "application/json", "", `{"key": "ZGVza3RvcHxodHRwczovL2EudGVzdC9jLzE=", "lease": {"slot": 4294967295, "state": 1, "key_hash": 2}}`)
	good := `{"results": [{"key": $KEY, "outcome": "ok", "status": 200, "duration_ms": 5, "headers": {"content-type": "text/html"}, "body": "PGh0bWw+PC9odG1sPg==", "lease": $LEASE}]}`
	addJSON("/v1/results", good)
	add("POST", "/v1/results", "application/json", "", `{"results": [{"key": $KEY, "outcome": "teapot", "status": 1000, "lease": {"slot": 4294967295, "state": 9, "key_hash": 9}}]}`)
	add("POST", "/v1/results", wire.ResultsContentType, "", good)
	addJSON("/internal/results", good)
	bin := string(wire.EncodeResults(nil, []wire.Result{{Key: []byte("desktop|https://a.test/c/2"), Outcome: "not_found", Status: 404,
		Lease: wire.Lease{Slot: 1, State: 1 << 40, KeyHash: shm.KeyHash([]byte("desktop|https://a.test/c/2"))}}}))
	add("POST", "/internal/results", wire.ResultsContentType, "", bin)
	add("POST", "/internal/results", wire.ResultsContentType, "", bin[:len(bin)/2])
	add("POST", "/v1/claim", "application/json", "", `{"limit": 1, "renderer": "farm-us"}`)
	addJSON("/v1/leases/release", `{"key": $KEY, "lease": $LEASE}`)
	add("POST", "/v1/leases/release", "application/json", "", `{"key": "", "lease": {"slot": 3, "state": 0, "key_hash": 0}}`)
	addJSON("/internal/claim", `{"n": 1, "holder": 7, "ttl_ms": 60000}`)
	add("POST", "/v1/claim", "application/json", "", string(apiJSONSeed(f, "limit", "2", "renderer", `"farm-eu"`, "lease", `"5m"`)))
	add("POST", "/v1/prioritize", "application/json", "", string(apiJSONSeed(f, "prefix", `"https://a.test/"`, "mode", `"rush"`, "device", `"mobile"`)))
	add("POST", "/v1/leases/extend", "application/json", "", string(apiJSONSeed(f, "key", "$KEY", "lease", "$LEASE", "ttl", `"11m"`)))
	add("POST", "/v1/results", "application/json", "", string(apiJSONSeed(f, "results", "key", "$KEY", "outcome", `"ok"`, "status", "200", "lease", "$LEASE")))
	sitemap := `<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` +
		`<url><loc>https://a.test/s/1</loc><changefreq>daily</changefreq></url><url><loc>https://elsewhere.test/</loc></url></urlset>`
	add("POST", "/v1/sitemaps", "application/xml", "device=mobile", sitemap)
	add("POST", "/v1/sitemaps", "text/xml", "", sitemap[:len(sitemap)/2])
	add("POST", "/v1/sitemaps", "application/gzip", "", "\x1f\x8b\x08\x00garbled")
	add("POST", "/v1/sitemaps", "application/xml", "", "")
	addJSON("/v1/sitemaps", `{"url": "https://a.test/sitemap.xml", "device": "desktop"}`)
	add("POST", "/v1/sitemaps", "application/json", "", `{"url": "https://not-allowed.test/sitemap.xml"}`)
	add("GET", "/v1/sitemaps/{run}", "", "", "")
	add("GET", "/v1/sitemaps/nope", "", "", "")
	add("GET", "/internal/status", "", "", "")
	// A plan: a good file, and aliases that stand for billions of nodes (refused with a 400).
	add("POST", wire.PathPlan, "application/yaml", "", "routes:\n  - {name: c, match: prefix, path: /c/, interval: 6h}\n")
	for _, seed := range aliasSeeds(f) {
		add("POST", wire.PathPlan, "application/yaml", "", string(seed))
	}
	add("PUT", "/v1/targets", "application/json", "", "[]")
	add("GET", "/nope", "", "", "")
	add("GET", "//v1/../v1/queue", "", "", "")
	add("BREW", "/v1/claim", "text/plain", "x=1", "coffee")
	f.Fuzz(func(t *testing.T, mi, pi, ci uint8, path, query, ctype string, body []byte) {
		w.clock.Add(apiClockStep)
		req, ok := w.request(mi, pi, ci, path, query, ctype, body)
		if ok {
			w.check(t, req)
		}
	})
}

// apiRequestBound is the longest one request may take. None should come near it: the bodies
// are small and nothing is fetched; the heavy-request limiter's wait is 5 s, so a request that
// found the budget leaked would exceed it.
const apiRequestBound = 3 * time.Second

// The clock starts at 2027-01-15 and steps 10 s between inputs: a lease of the default TTL
// (10m) lapses 60 inputs after its grant, a delete's hold (2m) after 12.
const (
	apiStartMs   = int64(1_800_000_000_000)
	apiClockStep = int64(10_000)
)

var (
	apiMethods = []string{"GET", "POST", "DELETE", "HEAD", "PUT", "PATCH", "OPTIONS", "TRACE", "CONNECT", "BREW", "post"}
	// apiPaths are worker 0's registered paths, with {run} for the last sitemap run, and a few
	// that nothing is registered for.
	apiPaths = []string{"/v1/targets", "/v1/discover", "/v1/prioritize", "/v1/pages", "/v1/claim", "/v1/results",
		"/v1/leases/extend", "/v1/leases/release", "/v1/sitemaps", "/v1/sitemaps/{run}", "/v1/queue",
		wire.PathClaim, wire.PathResults, wire.PathStatus, "/", "/v1/", "/v1/targets/", "/v1/leases",
		"/v1/keys/check", "/v1/keys/migrate", wire.PathPlan, wire.PathValidators}
	apiContentTypes = []string{"application/json", "text/plain", wire.ResultsContentType, "application/xml", "text/xml",
		"application/gzip", "", "application/json; charset=utf-8", "multipart/form-data; boundary=x"}
	// apiSeededKeys are the targets the set-up files; the store comparison reads their target
	// and page records too (c/0 holds a page).
	apiSeededKeys = [][]byte{[]byte("desktop|https://a.test/c/0"), []byte("desktop|https://a.test/c/1"),
		[]byte("desktop|https://a.test/c/2"), []byte("desktop|https://a.test/c/3")}
)

func apiIndexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// fuzzWorker0 is worker 0's mux over a store and segment of its own, and what the inputs
// carry from one to the next.
type fuzzWorker0 struct {
	mux      *http.ServeMux
	st       store.Store
	seg      *shm.Segment
	clock    atomic.Int64 // ms; moved only between requests
	running  []string     // sitemap runs started and not seen finished
	lastRun  string
	jobKey   []byte // the last job handed out, for $KEY and $LEASE
	jobLease wire.Lease
}

// waitEnded is a wait that has ended: render on miss answers at once in the fuzz.
var waitEnded = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

// refuseTransport fails every fetch at once: a sitemap run never reaches the network.
type refuseTransport struct{}

func (refuseTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("fetches are refused in this test")
}

// newFuzzWorker0 wires worker 0's handlers as package node assembles them (the same types, options
// and sharing: one Limiter, one KeyLocks, every write through sweep.Changes), then files four
// targets, renders c/0 through the remote endpoints so that it has a page, and takes a live
// lease. What differs from the binary: no sweep loop and no GC run, no listener, an injected
// clock, and the sitemap client's transport.
func newFuzzWorker0(f *testing.F) *fuzzWorker0 {
	dir := f.TempDir()
	cfg, err := config.Parse([]byte("queue:\n  max_leases: 256\nrender:\n  domains: [a.test]\n"))
	if err != nil {
		f.Fatal(err)
	}
	nd, err := settings.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	pol := nd.Policy
	polFn := func() *policy.Policy { return pol }
	intakeSet := func() *intake.Settings { return &nd.Intake }
	claimSet := func() *claim.Settings { return &nd.Claim }
	w := &fuzzWorker0{}
	w.clock.Store(apiStartMs)
	now := w.clock.Load
	seg, err := shm.Create(filepath.Join(dir, "seg"), shm.Options{ReadyCapacity: 64, LeaseCapacity: cfg.Queue.MaxLeases,
		Workers: 4, EpochMs: apiStartMs - qtest.Hour})
	if err != nil {
		f.Fatal(err)
	}
	st, err := badgerstore.Open(filepath.Join(dir, "db"), &badgerstore.Options{Floor: seg.Floor(), Logger: qtest.Log(nil), RefuseImplausibleDue: true})
	if err != nil {
		seg.Close()
		f.Fatal(err)
	}
	w0, _ := seg.Worker(0)
	writer := sweep.NewChanges().Wrap(st)
	locks := &intake.KeyLocks{}
	heavy := api.NewLimiter(api.DefaultHeavyBytes, 0)
	index := &claim.IndexSource{Scanner: st, Segment: seg, Policy: polFn, Settings: claimSet, Now: now}
	// Render on miss as worker 0 has it, except that a wait ends at once (no render runs here).
	// One targets service for every entry point, as in worker 0.
	targetsSvc := intaketest.Targets(f, intake.TargetsDeps{Store: st, Writer: writer, Deleter: writer, Locks: locks, Seg: seg, Settings: intakeSet, Now: now})
	misses := &misses.Flights{Targets: targetsSvc, Settings: func() *misses.Settings { return &nd.Misses },
		After: func(time.Duration) <-chan time.Time { return waitEnded }}
	control := &api.Control{
		Index:   index,
		Applier: intaketest.Applier(f, apply.ApplierDeps{Store: st, Writer: writer, Locks: locks, Seg: seg, Settings: intakeSet, Now: now, Log: qtest.Log(nil), Misses: misses}),
		Limit:   heavy,
		Status:  func() wire.Status { return wire.Status{Serving: true} },
		Log:     qtest.Log(nil),
		Targets: targetsSvc,
	}
	mux := http.NewServeMux()
	control.Register(mux)
	targets := &api.Targets{Targets: targetsSvc, Limit: heavy}
	targets.Register(mux)
	runs := &sitemapruns.Runs{Targets: targetsSvc, Settings: func() *sitemapruns.Settings { return &nd.Sitemap },
		Client: &http.Client{Transport: refuseTransport{}}}
	if err := runs.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	(&api.Sitemaps{Runs: runs, Limit: heavy}).Register(mux)
	(&api.Operate{Targets: targets.Targets, Misses: misses}).Register(mux)
	(&api.Remote{Applier: control.Applier, Limit: heavy, Claimer: qtest.Must(claim.New(claim.Options{Segment: seg, Worker: w0,
		Fallback: index, Settings: claimSet, Now: now, Holder: uint64(os.Getpid())<<16 | 0xffff}))(f)}).Register(mux)
	(&api.Queue{Seg: seg, Now: now}).Register(mux)
	(&api.Explain{Targets: targetsSvc}).Register(mux)
	(&api.Keys{Targets: targets.Targets}).Register(mux)
	(&api.Plan{Compute: func(ctx context.Context, file []byte) (wire.Plan, error) {
		next, err := settings.ParsePlan(ctx, file)
		if err != nil {
			return wire.Plan{}, err
		}
		return capacity.Plan(st, pol, next, capacity.Capacity{PerSecond: 1}, 0)
	}}).Register(mux)
	f.Cleanup(func() {
		runs.Stop()
		st.Close()
		seg.Close()
	})
	w.mux, w.st, w.seg = mux, st, seg
	w.setUp(f)
	return w
}

// setUp files the seeded targets, renders c/0 (the first due) and leases c/1, through the
// endpoints themselves.
func (w *fuzzWorker0) setUp(f *testing.F) {
	var items []string
	for _, k := range apiSeededKeys {
		items = append(items, fmt.Sprintf(`{"url": %q}`, strings.TrimPrefix(string(k), "desktop|")))
	}
	w.mustServe(f, "POST", "/v1/targets", "["+strings.Join(items, ",")+"]", 200)
	w.mustServe(f, "POST", "/v1/claim", `{"limit": 1, "renderer": "setup"}`, 200)
	if string(w.jobKey) != string(apiSeededKeys[0]) {
		f.Fatalf("the set-up claimed %q, not %q", w.jobKey, apiSeededKeys[0])
	}
	w.mustServe(f, "POST", "/v1/results", string(w.substitute([]byte(`{"results": [{"key": $KEY, "outcome": "ok", "status": 200, `+
		`"headers": {"content-type": "text/html"}, "body": "PGh0bWw+c2V0LXVwPC9odG1sPg==", "lease": $LEASE}]}`))), 200)
	w.mustServe(f, "POST", "/v1/claim", `{"limit": 1}`, 200)
	if string(w.jobKey) != string(apiSeededKeys[1]) {
		f.Fatalf("the set-up claimed %q, not %q", w.jobKey, apiSeededKeys[1])
	}
}

func (w *fuzzWorker0) mustServe(f *testing.F, method, path, body string, want int) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.mux.ServeHTTP(rec, req)
	if rec.Code != want {
		f.Fatalf("set-up: %s %s answered %d, not %d: %s", method, path, rec.Code, want, rec.Body.Bytes())
	}
	w.remember(req, rec)
}

// request builds the request an input describes, as net/http's server would hand it over;
// false for one the server would refuse before any handler (a bad request line or header).
func (w *fuzzWorker0) request(mi, pi, ci uint8, path, query, ctype string, body []byte) (*http.Request, bool) {
	method := apiMethods[int(mi&0x7f)%len(apiMethods)]
	if pi < 0xf0 {
		path = apiPaths[int(pi)%len(apiPaths)]
	}
	path = strings.ReplaceAll(path, "{run}", w.lastRun)
	if ci < 0xf0 {
		ctype = apiContentTypes[int(ci)%len(apiContentTypes)]
	}
	target := path
	if query != "" {
		target += "?" + query
	}
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(target, " \t") || !validHeaderValue(ctype) {
		return nil, false
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, false
	}
	if len(body) > 0 && body[0] == 0 {
		body = apiJSON(body[1:], false)
	}
	body = w.substitute(body)
	req := &http.Request{Method: method, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Host: "w0", RemoteAddr: "@", Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
	if mi&0x80 != 0 { // a body of unknown length
		req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req.WithContext(context.Background()), true
}

// apiJSONKeys and apiJSONValues make the bodies of apiJSON: every field name the JSON
// endpoints know, a few they do not, and values of every type, valid and not, for them.
var (
	apiJSONKeys = []string{"url", "device", "interval", "source", "due", "prefix", "mode", "limit", "lease", "renderer",
		"key", "ttl", "results", "outcome", "status", "duration_ms", "headers", "body", "err", "stage", "n", "holder",
		"ttl_ms", "slot", "state", "key_hash", "colour"}
	apiJSONValues = []string{`"https://a.test/c/0"`, `"https://a.test/c/1"`, `"https://a.test/f/9"`, `"https://a.test/"`,
		`"https://elsewhere.test/x"`, `"ftp://a.test/"`, `""`, `"desktop"`, `"mobile"`, `"watch"`, `"Farm"`, `"farm-eu"`,
		`"a-too-long-name"`, `"6h"`, `"1s"`, `"5m"`, `"10m"`, `"11m"`, `"sitemap"`, `"discovered"`, `"api"`, `"rush"`,
		`"wait"`, `"2027-02-01T00:00:00Z"`, `"1999-12-31T00:00:00Z"`, `"ok"`, `"not_found"`, `"timeout"`, `"teapot"`, `0`,
		`1`, `2`, `-1`, `200`, `404`, `1000`, `1001`, `99999999999999999999`, `1.5`, `true`, `null`, `[]`, `{}`, "$KEY",
		"$LEASE", `{"slot": 4294967295, "state": 1, "key_hash": 2}`, `{"slot": 0, "state": 0, "key_hash": 0}`,
		`"ZGVza3RvcHxodHRwczovL2EudGVzdC9jLzE="`, `"PGh0bWw+PC9odG1sPg=="`, `{"content-type": "text/html"}`}
)

// apiJSON builds a JSON object from b, two bytes a field: a key of apiJSONKeys and a value of
// apiJSONValues. The key "results" takes the rest of b as the one result of its array.
func apiJSON(b []byte, nested bool) []byte {
	out := []byte{'{'}
	for i := 0; i+1 < len(b); i += 2 {
		if i > 0 {
			out = append(out, ',')
		}
		k := apiJSONKeys[int(b[i])%len(apiJSONKeys)]
		out = append(strconv.AppendQuote(out, k), ':')
		if k == "results" && !nested {
			out = append(append(append(out, '['), apiJSON(b[i+1:], true)...), ']')
			break
		}
		out = append(out, apiJSONValues[int(b[i+1])%len(apiJSONValues)]...)
	}
	return append(out, '}')
}

// apiJSONSeed is the apiJSON input of the given keys and values (a "results" key takes no
// value: the fields after it are its result's).
func apiJSONSeed(f *testing.F, kv ...string) []byte {
	b := []byte{0}
	for i := 0; i < len(kv); i++ {
		k := apiIndexOf(apiJSONKeys, kv[i])
		if k < 0 {
			f.Fatalf("seed key %s is not in the list", kv[i])
		}
		b = append(b, byte(k))
		if kv[i] == "results" {
			continue // its result's fields follow
		}
		i++
		v := apiIndexOf(apiJSONValues, kv[i])
		if v < 0 {
			f.Fatalf("seed value %s is not in the list", kv[i])
		}
		b = append(b, byte(v))
	}
	return b
}

// validHeaderValue is what net/http's server lets through as a header value.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// substitute puts the last job's key and lease where a body says $KEY and $LEASE.
func (w *fuzzWorker0) substitute(body []byte) []byte {
	if w.jobKey == nil || !bytes.Contains(body, []byte("$")) {
		return body
	}
	key, _ := json.Marshal(w.jobKey)
	lease, _ := json.Marshal(w.jobLease)
	body = bytes.ReplaceAll(body, []byte("$KEY"), key)
	return bytes.ReplaceAll(body, []byte("$LEASE"), lease)
}

// remember keeps what a successful answer hands out: a job's key and lease, an extended
// lease, a sitemap run's id.
func (w *fuzzWorker0) remember(req *http.Request, rec *httptest.ResponseRecorder) {
	if rec.Code != http.StatusOK && rec.Code != http.StatusAccepted {
		return
	}
	switch req.URL.Path {
	case "/v1/claim", wire.PathClaim:
		var resp struct{ Jobs []wire.Job }
		if json.Unmarshal(rec.Body.Bytes(), &resp) == nil && len(resp.Jobs) > 0 {
			w.jobKey, w.jobLease = resp.Jobs[0].Key, resp.Jobs[0].Lease
		}
	case "/v1/leases/extend":
		var resp wire.LeaseResponse
		if json.Unmarshal(rec.Body.Bytes(), &resp) == nil {
			w.jobLease = resp.Lease
		}
	case "/v1/sitemaps":
		var resp struct{ ID string }
		if json.Unmarshal(rec.Body.Bytes(), &resp) == nil && resp.ID != "" {
			w.lastRun = resp.ID
			w.running = append(w.running, resp.ID)
		}
	}
}

// check serves req and checks the answer against the properties of FuzzAPIEndpoints.
func (w *fuzzWorker0) check(t *testing.T, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	desc := fmt.Sprintf("%s %s (Content-Type %q, Content-Length %d) body %q", req.Method, req.RequestURI,
		req.Header.Get("Content-Type"), req.ContentLength, clip(body, 600))
	_, pattern := w.mux.Handler(req)
	if strings.HasPrefix(pattern, "/internal/debug/pprof") {
		return
	}
	write := pattern != "" && req.Method != http.MethodGet && req.Method != http.MethodHead
	// A GET of a page never writes, whatever it asks (a render on miss is a POST) and whatever
	// its answer: a page on another site can make an operator's browser send one.
	readOnly := pattern == "GET /v1/pages"
	compare := (write || readOnly) && w.runsFinished(t)
	var before string
	if compare {
		before = w.fingerprint(t)
	}
	rec := httptest.NewRecorder()
	took, panicked := serveBounded(w.mux, rec, req)
	if panicked != "" {
		t.Fatalf("%s panicked: %s", desc, panicked)
	}
	if took > apiRequestBound {
		t.Fatalf("%s took %v", desc, took)
	}
	code := rec.Code
	t.Logf("%s: %d %q", desc, code, clip(rec.Body.Bytes(), 200))
	if code < 100 || code > 599 {
		t.Fatalf("%s answered status %d", desc, code)
	}
	if pattern == "" {
		// The mux's own answer: no handler is registered for this path or method.
		switch code {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusMovedPermanently,
			http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			t.Fatalf("%s matched no pattern but answered %d: %q", desc, code, clip(rec.Body.Bytes(), 300))
		}
		return
	}
	if code >= 400 {
		checkErrorBody(t, desc, rec)
	}
	if compare && readOnly {
		if after := w.fingerprint(t); after != before {
			t.Fatalf("%s answered %d and wrote: now %s, was %s", desc, code, after, before)
		}
	}
	if compare && code >= 400 && code < 500 && !landedBeforeBreaking(pattern, rec) {
		if after := w.fingerprint(t); after != before {
			t.Fatalf("%s answered %d %q but changed the store or the leases:\n%s\nwas\n%s", desc, code,
				clip(rec.Body.Bytes(), 300), after, before)
		}
	}
	w.remember(req, rec)
}

// serveBounded serves req on h, giving up on it after apiRequestBound; it returns how long it
// took and, if it panicked, the panic and its stack.
func serveBounded(h http.Handler, rec *httptest.ResponseRecorder, req *http.Request) (time.Duration, string) {
	done := make(chan string, 1)
	start := time.Now()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
		}()
		h.ServeHTTP(rec, req)
		done <- ""
	}()
	timer := time.NewTimer(apiRequestBound + time.Second)
	defer timer.Stop()
	select {
	case p := <-done:
		return time.Since(start), p
	case <-timer.C:
		return time.Since(start), ""
	}
}

// checkErrorBody fails t unless rec is a JSON error: {"error": non-empty, "field": a string if
// present}. POST /v1/targets adds its item report to it (docs/API.md: {accepted, rejected,
// errors: [{index, field, error}], error}).
func checkErrorBody(t *testing.T, desc string, rec *httptest.ResponseRecorder) {
	t.Helper()
	ct, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	if err != nil || ct != "application/json" {
		t.Fatalf("%s answered %d with Content-Type %q: %q", desc, rec.Code, rec.Header().Get("Content-Type"), clip(rec.Body.Bytes(), 300))
	}
	var e struct {
		Error *string
		Field any
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("%s answered %d with a body that is not a JSON object (%v): %q", desc, rec.Code, err, clip(rec.Body.Bytes(), 300))
	}
	if _, ok := e.Field.(string); e.Field != nil && !ok {
		t.Fatalf("%s answered %d with a field that is not a string: %q", desc, rec.Code, clip(rec.Body.Bytes(), 300))
	}
	if e.Error != nil && *e.Error != "" {
		return
	}
	t.Fatalf("%s answered %d without an error message: %q", desc, rec.Code, clip(rec.Body.Bytes(), 300))
}

// landedBeforeBreaking reports a target upload whose 4xx says items landed before its body
// broke or grew past the limit (docs/API.md: each still reports what landed).
func landedBeforeBreaking(pattern string, rec *httptest.ResponseRecorder) bool {
	if pattern != "POST /v1/targets" {
		return false
	}
	var resp wire.TargetsResponse
	return json.Unmarshal(rec.Body.Bytes(), &resp) != nil || resp.Accepted > 0
}

// runsFinished reports whether every sitemap run started so far has finished (so none can
// write during the next request), forgetting those that have.
func (w *fuzzWorker0) runsFinished(t *testing.T) bool {
	still := w.running[:0]
	for _, id := range w.running {
		rec := httptest.NewRecorder()
		w.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sitemaps/"+id, nil))
		var run wire.SitemapRun
		if err := json.Unmarshal(rec.Body.Bytes(), &run); err != nil {
			t.Fatalf("GET /v1/sitemaps/%s: %d %q", id, rec.Code, rec.Body.Bytes())
		}
		if run.Status == wire.RunRunning {
			still = append(still, id)
		}
	}
	w.running = still
	return len(still) == 0
}

// fingerprint sums up what a write could change: every schedule row and its key's lease, the
// lease table's counts, and the seeded keys' targets and pages.
func (w *fuzzWorker0) fingerprint(t *testing.T) string {
	h := fnv.New64a()
	rows := 0
	leases, now := w.seg.Leases(), w.clock.Load()
	err := w.st.ForEachSchedule(nil, func(k []byte, row store.Row) error {
		rows++
		b, err := row.AppendBinary(append(bytes.Clone(k), 0))
		if err != nil {
			return err
		}
		h.Write(b)
		if li, ok := leases.Lookup(shm.KeyHash(k), now); ok {
			fmt.Fprintf(h, "%+v", li)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("fingerprint: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows %x; leases %+v\n", rows, h.Sum64(), leases.Stats(now))
	for _, k := range apiSeededKeys {
		tgt, err := w.st.GetTarget(k)
		fmt.Fprintf(&b, "%s target %+v %v\n", k, tgt, err)
		page, err := w.st.GetPage(k)
		fmt.Fprintf(&b, "  page %d %q %v\n", page.Status, page.Body, err)
	}
	return b.String()
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "…"...)
	}
	return b
}
