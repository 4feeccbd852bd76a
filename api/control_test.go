package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/leases"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

const (
	hour  = qtest.Hour
	start = int64(1_800_000_000_000)
)

// serve runs a Control for e on a unix socket and returns a client for it.
func serve(t *testing.T, e *qtest.Env) *wire.Client {
	t.Helper()
	return wire.NewClient(serveSocket(t, e))
}

// serveSocket runs a Control for e on a unix socket and returns the socket's path.
func serveSocket(t *testing.T, e *qtest.Env) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "w0.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := &Control{
		Index:   &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now},
		Applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
		Status:  func() wire.Status { return wire.Status{Serving: true, Sweeps: 7} },
	}
	mux := http.NewServeMux()
	c.Register(mux)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// socketHTTP is a plain HTTP client of the unix socket at sock, for requests wire.Client does
// not make.
func socketHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

func TestIndexClaimAndResultsOverTheSocket(t *testing.T) {
	// Under ready a rendered row is due one cadence after its result (asserted below).
	e := qtest.New(t, "queue: {policy: ready}\nroutes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\n", start, shm.Options{})
	keys := []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2", "desktop|https://a.test/c/3"}
	for i, k := range keys {
		e.Put(k, start-int64(3-i)*hour, true, 0, store.Lanes{NeverRendered: true})
	}
	cl := serve(t, e)
	ctx := context.Background()
	if st, err := cl.Status(ctx); err != nil || !st.Serving || st.Sweeps != 7 {
		t.Fatalf("status %+v %v", st, err)
	}
	jobs, err := IndexFallback{cl}.ClaimIndex(ctx, claim.IndexClaim{N: 2, Holder: 42})
	if err != nil || len(jobs) != 2 || string(jobs[0].Key) != keys[0] || jobs[0].Source != claim.SourceIndex {
		t.Fatalf("claim %+v %v", jobs, err)
	}
	if info, ok := e.Seg.Leases().Lookup(jobs[0].KeyHash, e.Now()); !ok || info.Holder != 42 {
		t.Fatal("the granted job is not leased for its holder")
	}
	// Row 2 is deleted while it renders: its result must not bring it back.
	if err := e.Store.DeleteTarget(jobs[1].Key); err != nil {
		t.Fatal(err)
	}
	e.Advance(1000)
	st, err := cl.SendResults(ctx, []wire.Result{
		{Key: jobs[0].Key, Outcome: "ok", Status: 200, DurationMs: 120, Body: []byte("<html>1</html>"),
			Headers: map[string]string{"content-type": "text/html", "x-junk": "dropped"}, Lease: intake.WireLease(jobs[0].Lease)},
		{Key: jobs[1].Key, Outcome: "ok", Status: 200, Body: []byte("<html>2</html>"), Lease: intake.WireLease(jobs[1].Lease)},
	})
	if err != nil || st.Applied != 1 || st.Skipped != 1 {
		t.Fatalf("results %+v %v", st, err)
	}
	row, err := e.Store.GetSchedule(jobs[0].Key)
	if err != nil || row.DueAtMs != e.Now()+24*hour || row.NeverRendered || row.Failing || row.EffectiveIntervalMs != 24*hour {
		t.Fatalf("rescheduled row %+v %v", row, err)
	}
	page, err := e.Store.GetPage(jobs[0].Key)
	if err != nil || string(page.Body) != "<html>1</html>" || page.RenderedAtMs != e.Now() || len(page.Headers) != 1 {
		t.Fatalf("page %+v %v", page, err)
	}
	tgt, err := e.Store.GetTarget(jobs[0].Key)
	if err != nil || tgt.LastRender.Status != 200 || tgt.LastRender.DurationMs != 120 || tgt.DemandRung == 0 {
		t.Fatalf("target %+v %v", tgt, err)
	}
	if _, err := e.Store.GetSchedule(jobs[1].Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted row came back: %v", err)
	}
	// Released with the commit-visibility grace: still unclaimable for 5 s, then free.
	if _, s := e.Seg.Leases().Acquire(jobs[0].KeyHash, e.Now()+4999, 600_000, 1); s != shm.Held {
		t.Fatalf("lease inside the grace: %v", s)
	}
	if _, s := e.Seg.Leases().Acquire(jobs[0].KeyHash, e.Now()+5000, 600_000, 1); s != shm.Acquired {
		t.Fatalf("lease after the grace: %v", s)
	}
}

func TestControlRejectsBadInputNamingTheField(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	cl := socketHTTP(serveSocket(t, e))
	binary := func(rs ...wire.Result) string { return string(wire.EncodeResults(nil, rs)) }
	for _, tc := range []struct {
		path, ctype, body, want string
		code                    int
	}{
		{wire.PathClaim, "", `{"n": 0}`, `"field":"n"`, 400},
		{wire.PathClaim, "", `{"n": 1, "bogus": true}`, `unknown field`, 400},
		{wire.PathClaim, "", `{"n": `, `bad JSON`, 400},
		{wire.PathResults, "", `{"results": [{"outcome": "ok"}]}`, `"field":"results[0].key"`, 400},
		{wire.PathResults, wire.ResultsContentType, binary(wire.Result{Outcome: "ok"}), `"field":"results[0].key"`, 400},
		{wire.PathResults, wire.ResultsContentType, binary(wire.Result{Key: []byte("desktop|https://a.test/")}), `"field":"results[0].outcome"`, 400},
		{wire.PathResults, wire.ResultsContentType, binary(wire.Result{Key: []byte("k"), Outcome: "ok"})[:12], `corrupt results batch`, 400},
		{wire.PathResults, wire.ResultsContentType, `{"results": []}`, `not a results batch`, 400},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://worker0"+tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s %q: %d %s, want %d containing %s", tc.path, tc.body, resp.StatusCode, b.String(), tc.code, tc.want)
		}
	}
	if _, err := (IndexFallback{wire.NewClient(filepath.Join(t.TempDir(), "none.sock"))}).ClaimIndex(context.Background(), claim.IndexClaim{N: 1, Holder: 1}); !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("unreachable worker 0: %v", err)
	}
}

// Render workers send their results in the binary form, which worker 0 decodes without JSON's
// reflection and base64; worker 0 still takes JSON on the same path (a render worker of an older
// build, during an upgrade).
func TestResultsTravelInTheBinaryForm(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "w0.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var ctype string
	var got []wire.Result
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.PathResults, func(w http.ResponseWriter, r *http.Request) {
		ctype = r.Header.Get("Content-Type")
		body, _ := readBody(w, r, wire.MaxResultsBody)
		got, err = wire.DecodeResults(body)
		ok(w, wire.ApplyStats{Applied: len(got)})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	sent := []wire.Result{
		{Key: []byte("desktop|https://a.test/c/1"), Outcome: "ok", Status: 200, Stage: "body", DurationMs: 1234,
			Headers: map[string]string{"content-type": "text/html", "etag": `"x"`, "cache-control": "max-age=60"},
			Body:    []byte("<html>1</html>"), Lease: wire.Lease{Slot: 4095, State: 1<<63 | 12345, KeyHash: 0xdeadbeefcafef00d}},
		{Key: []byte("mobile|https://a.test/"), Outcome: "server_error", Status: 503, Stage: "headers", DurationMs: -1,
			Err: "upstream said no", Lease: wire.Lease{Slot: 0, State: 0, KeyHash: 1}},
		{Key: []byte("k"), Outcome: "a future outcome"},
	}
	st, serr := wire.NewClient(sock).SendResults(context.Background(), sent)
	if serr != nil || st.Applied != len(sent) {
		t.Fatalf("send: %+v %v", st, serr)
	}
	if ctype != wire.ResultsContentType || err != nil || len(got) != len(sent) || string(got[0].Body) != string(sent[0].Body) {
		t.Fatalf("worker 0 got %q: %+v %v", ctype, got, err)
	}

	e := qtest.New(t, "", start, shm.Options{})
	e.Put("desktop|https://a.test/c/1", start-hour, true, 0, store.Lanes{NeverRendered: true})
	lease := grant(t, e, []byte("desktop|https://a.test/c/1"))
	req, _ := http.NewRequest(http.MethodPost, "http://worker0"+wire.PathResults,
		strings.NewReader(fmt.Sprintf(`{"results": [{"key": "ZGVza3RvcHxodHRwczovL2EudGVzdC9jLzE=", "outcome": "ok", "status": 200, `+
			`"lease": {"slot": %d, "state": %d, "key_hash": %d}}]}`, lease.Slot, lease.State, lease.KeyHash)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := socketHTTP(serveSocket(t, e)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), `"applied":1`) {
		t.Fatalf("JSON on the internal path: %d %s", resp.StatusCode, b.String())
	}
}

// fallbackFunc is a claim.Fallback stub.
type fallbackFunc func(context.Context, claim.IndexClaim) ([]claim.Job, error)

func (f fallbackFunc) ClaimIndex(ctx context.Context, req claim.IndexClaim) ([]claim.Job, error) {
	return f(ctx, req)
}

// An index claim that fails after it leased jobs hands them out (200) rather than answering 503
// and stranding their leases until their TTL; one that leased nothing is 503.
func TestIndexClaimFailingPartWayHandsOutItsJobs(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/c/1")
	lease, _ := e.Seg.Leases().Acquire(shm.KeyHash(key), e.Now(), 600_000, 3)
	var jobs []claim.Job
	c := &Control{Index: fallbackFunc(func(context.Context, claim.IndexClaim) ([]claim.Job, error) {
		return jobs, errors.New("claim: scan: disk gone")
	}), Applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}), Log: qtest.Log(nil)}
	mux := http.NewServeMux()
	c.Register(mux)
	post := func() (int, wire.ClaimResponse) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, wire.PathClaim, strings.NewReader(`{"n": 4, "holder": 3}`)))
		var resp wire.ClaimResponse
		json.Unmarshal(w.Body.Bytes(), &resp)
		return w.Code, resp
	}
	if code, _ := post(); code != http.StatusServiceUnavailable {
		t.Fatalf("nothing leased: %d, want 503", code)
	}
	jobs = []claim.Job{{Key: key, KeyHash: shm.KeyHash(key), Lease: lease}}
	if code, resp := post(); code != http.StatusOK || len(resp.Jobs) != 1 || leases.ClaimJob(resp.Jobs[0]).Lease != lease {
		t.Fatalf("one job leased before the failure: %d %+v", code, resp)
	}
}
