package api

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sitemap"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// Worker 0's peak heap while the heaviest inputs it accepts arrive at once: a 64 MiB results
// body and four sitemaps of 256 MiB once decompressed (two gzip bombs past
// sitemap.max_decompressed, two files within it whose one <loc> is 255 MiB), served from a
// loopback server. The handlers are worker 0's own (results, sitemaps, the heavy-request
// limiter) over a store and a segment in a temporary directory. What worker 0 may hold for them
// is bounded by the configured limits: MaxResultsBody for the results body (refused past it),
// sitemap.MaxToken per sitemap parse; the rest is spooled to disk or streamed. The results body
// is sent chunked, the worst case: worker 0 must read it up to its limit to refuse it. The peak of the
// heap in use above its level before, sampled every millisecond, must stay within twice that.
// Then, alone, a results body near MaxResultsBody that is accepted and applied is measured.
//
//	go test -run TestWorker0PeakHeapUnderHeavyRequests -v ./api/
func TestWorker0PeakHeapUnderHeavyRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB of temporary files")
	}
	e := qtest.New(t, `render:
  domains: ["127.0.0.1", "shop.test"]
sitemap:
  max_decompressed: 256MiB
`, start, shm.Options{})
	heavy := NewLimiter(DefaultHeavyBytes, 0)
	applier := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	targets := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}), Limit: heavy}
	sitemaps := newSitemaps(t, e, targets, heavy)
	mux := http.NewServeMux()
	targets.Register(mux)
	sitemaps.Register(mux)
	index := &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}
	(&Remote{Applier: applier, Limit: heavy, Claimer: qtest.Must(claim.New(claim.Options{Segment: e.Seg, Fallback: index, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}))(t)}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The sitemap files, compressed once up front: a few hundred KiB each in memory.
	decompressed := 256 << 20
	if invariants.Race {
		decompressed = 64 << 20 // the same bound, at a quarter of the race detector's time
	}
	bomb := gzipOf(t, `<urlset><url><loc>https://shop.test/`, decompressed+1024, `</loc></url></urlset>`)
	within := gzipOf(t, `<urlset><url><loc>https://shop.test/`, decompressed-1024, `</loc></url></urlset>`)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/bomb") {
			w.Write(bomb)
			return
		}
		w.Write(within)
	}))
	defer site.Close()

	// A body that declares its 64 MiB is refused before it is read.
	if code := postResults64MiB(t, srv.URL, 64<<20); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a declared 64 MiB results body: %d", code)
	}
	limits := uint64(wire.MaxResultsBody + 4*sitemap.MaxToken)
	var results int
	var runs []wire.SitemapRun
	base, peak := qtest.PeakHeapEvery(time.Millisecond, func() {
		var wg sync.WaitGroup
		wg.Go(func() { results = postResults64MiB(t, srv.URL, -1) })
		var mu sync.Mutex
		for i, name := range []string{"bomb-1", "bomb-2", "big-1", "big-2"} {
			wg.Go(func() {
				id := postSitemapURL(t, srv, fmt.Sprintf("%s/%s-%d.xml.gz", site.URL, name, i))
				run := waitRunFor(t, srv, id, 5*time.Minute)
				mu.Lock()
				runs = append(runs, run)
				mu.Unlock()
			})
		}
		wg.Wait()
	})
	if results != http.StatusRequestEntityTooLarge {
		t.Errorf("the 64 MiB results body: %d, want 413", results)
	}
	for _, run := range runs {
		if run.Status != wire.RunFailed || !(strings.Contains(run.Error, "max_decompressed") || strings.Contains(run.Error, "longer than")) {
			t.Errorf("run %+v: want refused by max_decompressed or the token bound", run)
		}
	}
	grew := peak - min(base, peak)
	t.Logf("peak heap in use: %.1f MiB above a base of %.1f MiB (%.2f× the %.1f MiB of configured limits)",
		qtest.MiB(grew), qtest.MiB(base), float64(grew)/float64(limits), qtest.MiB(limits))
	fmt.Printf("BenchmarkWorker0PeakHeap\t1\t%d peak-heap-B\t%.2f x-limits\n", grew, float64(grew)/float64(limits))
	if grew > 2*limits {
		t.Fatalf("peak heap grew by %.1f MiB, over twice the configured limits (%.1f MiB)", qtest.MiB(grew), qtest.MiB(limits))
	}

	// A results body near MaxResultsBody that is accepted: read, scanned, decoded and turned
	// into its write. Refusals above never decode; this does. What the results path holds at
	// once is the body and the decoded page (the body is garbage once decoded, but in use until
	// the next GC): within twice MaxResultsBody. The write is handed to a Writer that keeps it
	// without committing: the store's own copies while Badger commits a 32 MiB value are
	// Badger's, vary with its buffers and the GC's timing, and are not what this bounds.
	key := []byte("desktop|https://shop.test/accepted")
	e.Put(string(key), e.Now()-hour, false, 0, store.Lanes{NeverRendered: true})
	kept := &keepingWriter{st: e.Store}
	decodeOnly := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Writer: kept, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	accept := http.NewServeMux()
	(&Remote{Applier: decodeOnly, Limit: NewLimiter(DefaultHeavyBytes, 0), Claimer: qtest.Must(claim.New(claim.Options{Segment: e.Seg, Fallback: index, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}))(t)}).Register(accept)
	acceptSrv := httptest.NewServer(accept)
	defer acceptSrv.Close()
	body := jsonResults(t, wire.Result{Key: key, Outcome: "ok", Status: 200, Headers: map[string]string{"content-type": "text/html"},
		Body: bytes.Repeat([]byte("<p>x</p>"), store.MaxPageBody/8), Lease: grant(t, e, key)})
	var ans resultsAnswer
	base, peak = qtest.PeakHeapEvery(time.Millisecond, func() {
		ans = postResults(t, acceptSrv, "/v1/results", "application/json", body)
	})
	if ans.Code != http.StatusOK || ans.Applied != 1 || len(kept.writes) != 1 || kept.writes[0].Page == nil {
		t.Fatalf("an accepted %.1f MiB results body: %+v, %d writes", qtest.MiB(uint64(len(body))), ans, len(kept.writes))
	}
	// The page is stored compressed (intake.CompressPage); what it holds is the whole body.
	if plain, err := intake.PlainBody(kept.writes[0].Page); err != nil || len(plain) != store.MaxPageBody {
		t.Fatalf("the accepted page holds %d bytes (%v), want %d", len(plain), err, store.MaxPageBody)
	}
	grew = peak - min(base, peak)
	t.Logf("an accepted %.1f MiB results body: peak heap %.1f MiB above base (%.2f× MaxResultsBody)",
		qtest.MiB(uint64(len(body))), qtest.MiB(grew), float64(grew)/wire.MaxResultsBody)
	fmt.Printf("BenchmarkWorker0PeakHeapAcceptedResults\t1\t%d peak-heap-B\t%.2f x-limit\n", grew, float64(grew)/wire.MaxResultsBody)
	if grew > 2*wire.MaxResultsBody {
		t.Fatalf("an accepted results body: peak heap grew by %.1f MiB, over twice MaxResultsBody", qtest.MiB(grew))
	}
}

// keepingWriter keeps the writes it is given, committing nothing: a Change is decided on what
// st holds and its write kept.
type keepingWriter struct {
	st     store.Store
	writes []store.Write
}

func (k *keepingWriter) WriteSchedules(ws []store.Write) error {
	k.writes = append(k.writes, ws...)
	return nil
}

func (k *keepingWriter) Modify(cs []store.Change) ([]bool, error) {
	filed := make([]bool, len(cs))
	for i, c := range cs {
		var cur store.Current
		var err error
		cur.Row, err = k.st.GetSchedule(c.Key)
		cur.HasRow = err == nil
		cur.Target, err = k.st.GetTarget(c.Key)
		cur.HasTarget = err == nil
		w, ok, err := c.Decide(cur)
		if err != nil {
			return nil, err
		}
		if ok {
			k.writes = append(k.writes, w)
			filed[i] = true
		}
	}
	return filed, nil
}

// gzipOf compresses head, n bytes of 'x', then tail.
func gzipOf(t *testing.T, head string, n int, tail string) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	io.WriteString(zw, head)
	if _, err := io.Copy(zw, qtest.Repeat('x', n)); err != nil {
		t.Fatal(err)
	}
	io.WriteString(zw, tail)
	zw.Close()
	return buf.Bytes()
}

// postResults64MiB streams a 64 MiB JSON results body (one result whose page is 64 MiB of
// base64), generated as it is sent, declaring length (-1: chunked, so that worker 0 reads it
// up to MaxResultsBody before it can refuse it), and returns the status.
func postResults64MiB(t *testing.T, base string, length int64) int {
	const size = 64 << 20
	head := `{"results": [{"key": "desktop|https://shop.test/p", "outcome": "ok", "status": 200, "lease": {"slot": 0, "state": 1, "key_hash": 1}, "body": "`
	tail := `"}]}`
	body := io.MultiReader(strings.NewReader(head), qtest.Repeat('A', size-len(head)-len(tail)), strings.NewReader(tail))
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/results", body)
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0 // the server may close the connection once it refused the body
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitRunFor waits, by polling, until run id is no longer running, and fails the test if it
// still is after limit (a deadline on a condition, not time let pass).
func waitRunFor(t *testing.T, srv *httptest.Server, id string, limit time.Duration) wire.SitemapRun {
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(srv.URL + "/v1/sitemaps/" + id)
		if err != nil {
			t.Error(err)
			return wire.SitemapRun{}
		}
		var run wire.SitemapRun
		json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if run.Status != wire.RunRunning {
			return run
		}
		if time.Now().After(deadline) {
			t.Errorf("run %s still running after %s: %+v", id, limit, run)
			return run
		}
		time.Sleep(20 * time.Millisecond)
	}
}
