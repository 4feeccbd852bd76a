package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// legacyDueNode is worker 0's writers over a store that refuses implausible due times (as
// worker 0 opens it), holding rows an older version stored with due times out of range.
type legacyDueNode struct {
	*qtest.Env
	st      *store.Store
	applier *intake.Applier
	srv     *httptest.Server
}

// Keys of rows stored out of range: due 0 (1970) and past store.MaxDueMs.
const (
	legacyZero = "desktop|https://shop.test/c/zero"
	legacyFar  = "desktop|https://shop.test/c/far"
)

func newLegacyDueNode(t *testing.T) *legacyDueNode {
	e := qtest.New(t, sitemapYAML, start, shm.Options{})
	dir := filepath.Join(t.TempDir(), "db")
	old, err := store.Open(dir, &store.Options{Floor: e.Seg.Floor()}) // an older version: no refusal
	if err != nil {
		t.Fatal(err)
	}
	for key, due := range map[string]int64{legacyZero: 0, legacyFar: store.MaxDueMs + 1} {
		sch, err := store.NewSchedule([]byte(key), due, false, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		if err := old.WriteSchedules([]store.Write{{Schedule: sch, Target: &store.Target{URL: strings.TrimPrefix(key, "desktop|"), Device: "desktop", Source: store.SourceAPI}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dir, &store.Options{Floor: e.Seg.Floor(), RefuseImplausibleDue: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := &legacyDueNode{Env: e, st: st}
	locks := &intake.KeyLocks{}
	targets := &Targets{Store: st, Writer: st, Locks: locks, Policy: e.Policy, Now: e.Now}
	n.applier = &intake.Applier{Store: st, Locks: locks, Seg: e.Seg, Policy: e.Policy, Now: e.Now}
	mux := http.NewServeMux()
	targets.Register(mux)
	(&Operate{Targets: targets, Seg: e.Seg}).Register(mux)
	(&Sitemaps{Targets: targets, Policy: e.Policy, Now: e.Now}).Register(mux)
	(&Remote{Applier: n.applier}).Register(mux)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

// due is the stored due time of key.
func (n *legacyDueNode) due(key string) int64 {
	n.T.Helper()
	row, err := n.st.GetSchedule([]byte(key))
	if err != nil {
		n.T.Fatal(err)
	}
	return row.DueAtMs
}

func (n *legacyDueNode) post(path, ctype, body string) (int, string) {
	n.T.Helper()
	resp, err := http.Post(n.srv.URL+path, ctype, strings.NewReader(body))
	if err != nil {
		n.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A row an older version stored with a due time out of range does not break a write that
// keeps its due time: an upload that omits due, a rush, a wait, a sitemap run and a result
// each bring it into range (due now), and the funnel's refusal never fires from them.
func TestStoredImplausibleDueIsBroughtIntoRange(t *testing.T) {
	check := func(t *testing.T, n *legacyDueNode, step string, code, want int, body string) {
		t.Helper()
		if code != want {
			t.Fatalf("%s: %d %s", step, code, body)
		}
		for _, k := range []string{legacyZero, legacyFar} {
			if d := n.due(k); d != n.Now() {
				t.Fatalf("%s: %s due %d, want now %d", step, k, d, n.Now())
			}
		}
	}
	t.Run("upload", func(t *testing.T) {
		n := newLegacyDueNode(t)
		var items []string
		for i := range 4 {
			items = append(items, fmt.Sprintf(`{"url": "https://shop.test/c/new-%d"}`, i))
		}
		items = append(items, `{"url": "https://shop.test/c/zero", "interval": "6h"}`, `{"url": "https://shop.test/c/far"}`)
		code, body := n.post("/v1/targets", "application/json", "["+strings.Join(items, ",")+"]")
		check(t, n, "a 6-item upload", code, http.StatusOK, body)
		if !strings.Contains(body, `"accepted":6`) {
			t.Fatalf("upload: %s", body)
		}
	})
	for _, mode := range []string{"rush", "wait"} {
		t.Run(mode, func(t *testing.T) {
			n := newLegacyDueNode(t)
			code, body := n.post("/v1/prioritize", "application/json", `{"prefix": "https://shop.test/c/", "mode": "`+mode+`"}`)
			check(t, n, mode, code, http.StatusOK, body)
		})
	}
	t.Run("sitemap", func(t *testing.T) {
		n := newLegacyDueNode(t)
		sm := `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://shop.test/c/zero</loc></url><url><loc>https://shop.test/c/far</loc></url></urlset>`
		srv := &httptest.Server{URL: n.srv.URL}
		run := waitRun(t, srv, postSitemap(t, srv, "application/xml", strings.NewReader(sm)))
		if run.Status != wire.RunDone || run.Updated.Count != 2 {
			t.Fatalf("sitemap run: %+v", run)
		}
		check(t, n, "sitemap", http.StatusOK, http.StatusOK, "")
	})
	t.Run("result", func(t *testing.T) {
		n := newLegacyDueNode(t)
		var rs []wire.Result
		for _, k := range []string{legacyZero, legacyFar} {
			rs = append(rs, wire.Result{Key: []byte(k), Outcome: "ok", Status: 200, Lease: grant(t, n.Env, []byte(k))})
		}
		code, body := n.post("/v1/results", "application/json", string(jsonResults(t, rs...)))
		if code != http.StatusOK || !strings.Contains(body, `"applied":2`) {
			t.Fatalf("results: %d %s", code, body)
		}
		for _, k := range []string{legacyZero, legacyFar} {
			if d := n.due(k); !store.PlausibleDue(d) || d <= n.Now() {
				t.Fatalf("%s due %d after its result", k, d)
			}
		}
	})
}
