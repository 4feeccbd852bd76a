package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

type opNode struct {
	*qtest.Env
	srv     *httptest.Server
	applier *apply.Applier
	index   *claim.IndexSource
	sweeper *sweep.Sweeper
}

func newOpNode(t *testing.T) *opNode {
	e := qtest.New(t, "routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h, swr: 6h}\n", start, shm.Options{})
	n := &opNode{Env: e}
	locks := &intake.KeyLocks{}
	targets := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}
	n.applier = intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Locks: locks, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	n.index = &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}
	n.sweeper = qtest.Must(sweep.New(sweep.Options{Changes: sweep.NewChanges(), Store: sweep.FromStore(e.Store, nil), Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil)}))(t)
	mux := http.NewServeMux()
	targets.Register(mux)
	(&Operate{Targets: targets.Targets}).Register(mux)
	(&Remote{Applier: n.applier, Claimer: qtest.Must(claim.New(claim.Options{Segment: e.Seg, Worker: e.Worker0, Fallback: n.index,
		Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now, Holder: 0xffff}))(t)}).Register(mux)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *opNode) post(path, body string) (int, map[string]any) {
	n.T.Helper()
	resp, err := http.Post(n.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		n.T.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestDiscover(t *testing.T) {
	n := newOpNode(t)
	if code, out := n.post("/v1/discover", `{"url": "https://shop.test/c/new"}`); code != 201 || out["created"] != true {
		t.Fatalf("discover unknown: %d %v", code, out)
	}
	row, err := n.Store.GetSchedule([]byte("desktop|https://shop.test/c/new"))
	if err != nil || row.Submitted || row.DueAtMs != start || !row.NeverRendered {
		t.Fatalf("discovered row %+v %v", row, err)
	}
	n.post("/v1/targets", `[{"url": "https://shop.test/c/known", "source": "sitemap"}]`)
	if code, out := n.post("/v1/discover", `{"url": "https://shop.test/c/known"}`); code != 200 || out["created"] != false {
		t.Fatalf("discover known: %d %v", code, out)
	}
	if tgt, _ := n.Store.GetTarget([]byte("desktop|https://shop.test/c/known")); tgt.Source != store.SourceSitemap {
		t.Fatalf("a known sitemap target was downgraded to %v", tgt.Source)
	}
	if code, out := n.post("/v1/discover", `{"url": "not a url"}`); code != 400 || out["field"] != "url" {
		t.Fatalf("bad url: %d %v", code, out)
	}
}

func TestPrioritizeRushAndWait(t *testing.T) {
	n := newOpNode(t)
	n.post("/v1/targets", `[
		{"url": "https://shop.test/c/a", "source": "sitemap", "due": "2027-06-01T00:00:00Z"},
		{"url": "https://shop.test/c/b", "source": "sitemap", "due": "2027-06-01T00:00:00Z"},
		{"url": "https://shop.test/p/z", "source": "sitemap"}
	]`)
	for _, tc := range []struct{ body, field string }{
		{`{"url": "https://shop.test/c/a", "mode": "soon"}`, "mode"},
		{`{"url": "https://shop.test/c/a", "prefix": "https://shop.test/c/", "mode": "rush"}`, "url"},
		{`{"mode": "rush"}`, "url"},
		{`{"prefix": "::", "mode": "rush"}`, "prefix"},
		{`{"url": "https://shop.test/c/a", "device": "fridge", "mode": "rush"}`, "device"},
	} {
		if code, out := n.post("/v1/prioritize", tc.body); code != 400 || out["field"] != tc.field {
			t.Errorf("%s: %d %v, want 400 naming %s", tc.body, code, out, tc.field)
		}
	}
	if code, out := n.post("/v1/prioritize", `{"url": "https://shop.test/c/none", "mode": "rush"}`); code != 404 || out["field"] != "url" {
		t.Fatalf("unknown: %d %v", code, out)
	}
	if code, out := n.post("/v1/prioritize", `{"prefix": "https://shop.test/c/", "mode": "rush"}`); code != 200 || out["matched"] != 2.0 {
		t.Fatalf("rush prefix: %d %v", code, out)
	}
	for _, k := range []string{"desktop|https://shop.test/c/a", "desktop|https://shop.test/c/b"} {
		row, _ := n.Store.GetSchedule([]byte(k))
		if !row.Urgent || row.DueAtMs != start {
			t.Fatalf("%s after rush: %+v", k, row)
		}
	}
	// The rushed rows are claimed first, and the urgent mark clears with their render.
	n.sweeper.Sweep(context.Background())
	jobs, err := qtest.Must(claim.New(claim.Options{Segment: n.Seg, Fallback: n.index, Settings: qtest.Settings(n, ClaimSettingsOf), Now: n.Now, Holder: 1}))(t).Claim(context.Background(), 1)
	if err != nil || len(jobs) != 1 || !strings.Contains(string(jobs[0].Key), "/c/") {
		t.Fatalf("first claim after rush: %+v %v", jobs, err)
	}
	n.applier.Apply([]wire.Result{{Key: jobs[0].Key, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: intake.WireLease(jobs[0].Lease)}})
	if row, _ := n.Store.GetSchedule(jobs[0].Key); row.Urgent {
		t.Fatal("the urgent mark outlived the render")
	}
	if _, err := n.Store.GetPage(jobs[0].Key); err != nil {
		t.Fatal(err)
	}
	before, _ := n.Store.GetSchedule(jobs[0].Key)
	if code, _ := n.post("/v1/prioritize", `{"url": "`+strings.TrimPrefix(string(jobs[0].Key), "desktop|")+`", "mode": "wait"}`); code != 200 {
		t.Fatalf("wait: %d", code)
	}
	if _, err := n.Store.GetPage(jobs[0].Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("page after wait: %v", err)
	}
	if after, _ := n.Store.GetSchedule(jobs[0].Key); after != before {
		t.Fatalf("wait changed the schedule: %+v → %+v", before, after)
	}
}

func TestPagesServeWithinTheSWRWindow(t *testing.T) {
	n := newOpNode(t)
	n.post("/v1/targets", `[{"url": "https://shop.test/c/a", "source": "sitemap", "interval": "6h"}]`)
	key := []byte("desktop|https://shop.test/c/a")
	get := func() (int, http.Header, string) {
		resp, err := http.Get(n.srv.URL + "/v1/pages?url=" + url.QueryEscape("https://shop.test/c/a"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	if code, _, body := get(); code != 404 || !strings.Contains(body, "no rendered page") {
		t.Fatalf("no page yet: %d %s", code, body)
	}
	n.applier.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("<html>a</html>"), Headers: map[string]string{"content-type": "text/html"},
		Lease: grant(t, n.Env, key)}})
	n.Advance(7 * hour) // past the 6 h cadence, within the 6 h swr window of the catalog route
	code, h, body := get()
	if code != 200 || body != "<html>a</html>" || h.Get("Age") != "25200" || h.Get("X-Freshq-Stale") != "true" || h.Get("Content-Type") != "text/html" {
		t.Fatalf("stale within swr: %d %v %q", code, h, body)
	}
	n.Advance(6 * hour)
	if code, _, body := get(); code != 404 || !strings.Contains(body, "swr window") {
		t.Fatalf("past swr: %d %s", code, body)
	}
}

// An external client claims and posts results over HTTP while a local worker claims from the
// same ready set and index, turn about: no job is ever granted to both, every row is granted.
func TestRemoteRendererAlongsideLocalWorkers(t *testing.T) {
	n := newOpNode(t)
	var items []string
	for i := range 300 {
		items = append(items, fmt.Sprintf(`{"url": "https://shop.test/c/%03d", "source": "sitemap"}`, i))
	}
	n.post("/v1/targets", "["+strings.Join(items, ",")+"]")
	n.sweeper.Sweep(context.Background())
	var (
		mu      sync.Mutex
		granted = map[string]string{}
		dup     []string
	)
	record := func(who string, keys [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if prev, ok := granted[string(k)]; ok {
				dup = append(dup, fmt.Sprintf("%s: %s and %s", k, prev, who))
			}
			granted[string(k)] = who
		}
	}
	// Turns alternate, so both sides take part whatever the scheduler does; each turn goes
	// through the same ready set, lease table and index fallback.
	local := qtest.Must(claim.New(claim.Options{Segment: n.Seg, Fallback: n.index, Settings: qtest.Settings(n, ClaimSettingsOf), Now: n.Now, Holder: 7}))(t)
	localTurn := func() int {
		jobs, err := local.Claim(context.Background(), 5)
		if err != nil {
			t.Fatal(err)
		}
		keys := make([][]byte, len(jobs))
		for i, j := range jobs {
			keys[i] = j.Key
		}
		record("local", keys)
		return len(jobs)
	}
	remoteTurn := func() int { // over HTTP only, as a browser farm elsewhere would
		resp, err := http.Post(n.srv.URL+"/v1/claim", "application/json", strings.NewReader(`{"limit": 7, "lease": "5m"}`))
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Jobs []wire.RemoteJob }
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		keys := make([][]byte, len(out.Jobs))
		var results []wire.Result
		for i, j := range out.Jobs {
			keys[i] = j.Key
			if j.URL == "" || j.Device != "desktop" {
				t.Errorf("remote job without url/device: %+v", j)
			}
			results = append(results, wire.Result{Key: j.Key, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: j.Lease})
		}
		record("remote", keys)
		if len(results) > 0 {
			body, _ := json.Marshal(wire.ResultsRequest{Results: results})
			r2, err := http.Post(n.srv.URL+"/v1/results", "application/json", bytes.NewReader(body))
			if err != nil || r2.StatusCode != 200 {
				t.Fatalf("results: %v", err)
			}
			r2.Body.Close()
		}
		return len(out.Jobs)
	}
	for {
		if localTurn()+remoteTurn() == 0 {
			break
		}
	}
	if len(dup) > 0 {
		t.Fatalf("granted twice: %v", dup[:min(5, len(dup))])
	}
	remote := 0
	for _, who := range granted {
		if who == "remote" {
			remote++
		}
	}
	if len(granted) != 300 || remote == 0 || remote == 300 {
		t.Fatalf("%d rows granted, %d of them remotely; want all 300, shared", len(granted), remote)
	}
	if code, out := n.post("/v1/claim", `{"limit": 0}`); code != 400 || out["field"] != "limit" {
		t.Fatalf("bad limit: %d %v", code, out)
	}
	if code, out := n.post("/v1/claim", `{"limit": 1, "lease": "1s"}`); code != 400 || out["field"] != "lease" {
		t.Fatalf("bad lease: %d %v", code, out)
	}
	// The public endpoint speaks JSON only (docs/API.md); the binary batch is the control socket's.
	bin := wire.EncodeResults(nil, []wire.Result{{Key: []byte("desktop|https://shop.test/c/p0"), Outcome: "ok"}})
	resp, err := http.Post(n.srv.URL+"/v1/results", wire.ResultsContentType, bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a binary batch on /v1/results: %d, want 400", resp.StatusCode)
	}
}
