package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// The sitemap tests serve files from an httptest server on 127.0.0.1, which render.domains
// allows along with shop.test, the host of the pages; anything else is outside.
const sitemapYAML = `render:
  domains: ["127.0.0.1", "shop.test"]
sitemap:
  min_ttl: 6h
  max_depth: 2
  max_decompressed: 16MiB
`

func sitemapServer(t *testing.T) (*qtest.Env, *httptest.Server) {
	return sitemapServerYAML(t, sitemapYAML)
}

func sitemapServerYAML(t *testing.T, yaml string) (*qtest.Env, *httptest.Server) {
	e := qtest.New(t, yaml, start, shm.Options{})
	mux := http.NewServeMux()
	targets := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}
	newSitemaps(t, e, targets, nil).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return e, srv
}

// newSitemaps serves the sitemap runs of targets, started, and stopped when the test ends.
func newSitemaps(t testing.TB, e *qtest.Env, targets *Targets, limit *Limiter) *Sitemaps {
	runs := &sitemapruns.Runs{Targets: targets.intake(), Settings: qtest.Settings(e, SitemapSettingsOf)}
	if err := runs.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runs.Stop)
	return &Sitemaps{Runs: runs, Limit: limit}
}

// postSitemap starts a run and returns its id, failing the test unless the answer is 202.
func postSitemap(t *testing.T, srv *httptest.Server, contentType string, body io.Reader) string {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/sitemaps", contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusAccepted || out["id"] == "" || out["status"] != wire.RunRunning {
		t.Fatalf("POST /v1/sitemaps: %d %v", resp.StatusCode, out)
	}
	return out["id"]
}

func postSitemapURL(t *testing.T, srv *httptest.Server, u string) string {
	t.Helper()
	return postSitemap(t, srv, "application/json", strings.NewReader(`{"url": "`+u+`"}`))
}

// waitRun polls the run until it is no longer running.
func waitRun(t *testing.T, srv *httptest.Server, id string) wire.SitemapRun {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/v1/sitemaps/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var run wire.SitemapRun
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET run: %d %v", resp.StatusCode, err)
		}
		if run.Status != wire.RunRunning {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running: %+v", id, run)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func gz(t testing.TB, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A sitemaps.org-protocol file using every optional tag, extension namespaces and the odd
// broken entry.
const fullSitemap = `<?xml version="1.0" encoding="UTF-8"?>
<!-- generated -->
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9"
        xmlns:video="http://www.google.com/schemas/sitemap-video/1.1"
        xmlns:xhtml="http://www.w3.org/1999/xhtml"
        xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
        xsi:schemaLocation="http://www.sitemaps.org/schemas/sitemap/0.9 http://www.sitemaps.org/schemas/sitemap/0.9/sitemap.xsd">
  <url>
    <loc>https://shop.test/</loc>
    <lastmod>2026-11-01T10:00:00+00:00</lastmod>
    <changefreq>hourly</changefreq>
    <priority>1.0</priority>
    <xhtml:link rel="alternate" hreflang="de" href="https://shop.test/de/"/>
  </url>
  <url>
    <loc>
      https://shop.test/c/shoes?color=red&amp;size=42
    </loc>
    <lastmod>2026-10-30</lastmod>
    <changefreq>WEEKLY</changefreq>
    <priority>0.8</priority>
    <image:image>
      <image:loc>https://cdn.elsewhere.test/shoe.jpg</image:loc>
      <image:caption><![CDATA[A <red> shoe]]></image:caption>
    </image:image>
  </url>
  <url>
    <loc><![CDATA[https://shop.test/news/1]]></loc>
    <changefreq>never</changefreq>
    <news:news>
      <news:publication><news:name>Shop News</news:name><news:language>en</news:language></news:publication>
      <news:publication_date>2026-11-29</news:publication_date>
      <news:title>Sale</news:title>
    </news:news>
    <video:video><video:title>x</video:title><video:content_loc>https://v.test/x.mp4</video:content_loc></video:video>
  </url>
  <url><loc>https://shop.test/plain</loc></url>
  <url><loc>https://shop.test/daily</loc><changefreq>daily</changefreq></url>
  <url><loc>https://shop.test/monthly</loc><changefreq>monthly</changefreq><priority>0.1</priority></url>
  <url><loc>https://shop.test/yearly</loc><changefreq>yearly</changefreq></url>
  <url><loc>https://shop.test/always</loc><changefreq>always</changefreq></url>
  <url><loc>https://shop.test/odd</loc><changefreq>fortnightly</changefreq></url>
  <url><loc>https://evil.test/x</loc></url>
  <url><loc>ftp://shop.test/file</loc></url>
  <url><lastmod>2026-01-01</lastmod></url>
  <url><loc>https://shop.test/plain</loc></url>
</urlset>
`

func TestSitemapEveryOptionalTag(t *testing.T) {
	e, srv := sitemapServer(t)
	run := waitRun(t, srv, postSitemap(t, srv, "application/xml", strings.NewReader(fullSitemap)))
	if run.Status != wire.RunDone || run.Error != "" || run.Files != 1 || run.Source != "body" {
		t.Fatalf("run %+v", run)
	}
	if run.Added.Count != 9 || run.Updated.Count != 1 || run.Filtered.Count != 1 || run.Failed.Count != 2 || run.URLs != 13 {
		t.Fatalf("tallies: added %+v updated %+v filtered %+v failed %+v urls %d", run.Added, run.Updated, run.Filtered, run.Failed, run.URLs)
	}
	if run.Filtered.Sample[0] != "https://evil.test/x" || run.Updated.Sample[0] != "https://shop.test/plain" {
		t.Fatalf("samples %+v %+v", run.Filtered, run.Updated)
	}
	reasons := fmt.Sprint(run.Failed.Sample)
	if !strings.Contains(reasons, "absolute http(s)") || !strings.Contains(reasons, "without <loc>") {
		t.Fatalf("failure reasons %s", reasons)
	}
	// <changefreq> is the cadence, floored at sitemap.min_ttl (6h); none or an unknown value
	// leaves the cadence to the routes.
	day := 24 * hour
	for u, want := range map[string]int64{
		"https://shop.test/":                          6 * hour,
		"https://shop.test/always":                    6 * hour,
		"https://shop.test/daily":                     day,
		"https://shop.test/c/shoes?color=red&size=42": 7 * day,
		"https://shop.test/monthly":                   30 * day,
		"https://shop.test/yearly":                    365 * day,
		"https://shop.test/news/1":                    365 * day,
		"https://shop.test/plain":                     0,
		"https://shop.test/odd":                       0,
	} {
		for _, device := range []string{"desktop", "mobile"} {
			key := []byte(device + "|" + u)
			row, err := e.Store.GetSchedule(key)
			if err != nil || !row.Submitted || row.DueAtMs != start {
				t.Fatalf("%s: row %+v %v", key, row, err)
			}
			tg, err := e.Store.GetTarget(key)
			if err != nil || tg.Source != store.SourceSitemap || tg.StoredIntervalMs != want {
				t.Fatalf("%s: target %+v %v, want interval %d", key, tg, err, want)
			}
		}
	}
	if _, err := e.Store.GetSchedule([]byte("desktop|https://evil.test/x")); err == nil {
		t.Fatal("a URL outside render.domains was stored")
	}
	if n := len(e.AllRows()); n != 9*filedDevices {
		t.Fatalf("%d rows, want 9 URLs × %d devices", n, filedDevices)
	}

	// Re-posting the same sitemap, gzipped: the targets are updated and keep their due time;
	// a run for mobile alone finds its targets filed already by the first run, which named no
	// device and so filed every device.
	e.Advance(hour)
	run = waitRun(t, srv, postSitemap(t, srv, "application/gzip", bytes.NewReader(gz(t, fullSitemap))))
	if run.Status != wire.RunDone || run.Added.Count != 0 || run.Updated.Count != 10 {
		t.Fatalf("re-post: %+v", run)
	}
	if row, _ := e.Store.GetSchedule([]byte("desktop|https://shop.test/")); row.DueAtMs != start {
		t.Fatalf("re-import reset the due time: %+v", row)
	}
	resp, err := http.Post(srv.URL+"/v1/sitemaps?device=mobile", "text/xml; charset=utf-8", strings.NewReader(fullSitemap))
	if err != nil {
		t.Fatal(err)
	}
	var started map[string]string
	json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if run = waitRun(t, srv, started["id"]); run.Device != "mobile" || run.Added.Count != 0 || run.Updated.Count != 10 {
		t.Fatalf("mobile: %+v", run)
	}
}

func TestSitemapBadRequests(t *testing.T) {
	_, srv := sitemapServer(t)
	for _, c := range []struct {
		ct, body, field string
		code            int
	}{
		{"application/json", `{"url": "ftp://shop.test/s.xml"}`, "url", 400},
		{"application/json", `{"url": "https://evil.test/sitemap.xml"}`, "url", 400},
		{"application/json", `{"url": "https://shop.test/s.xml", "device": "fridge"}`, "device", 400},
		{"application/json", `{"url": "https://shop.test/s.xml", "depth": 9}`, "depth", 400}, // an unknown field, named
		{"application/json", `not json`, "", 400},
		{"application/xml", ``, "", 400},
		{"image/png", `x`, "Content-Type", 415},
	} {
		resp, err := http.Post(srv.URL+"/v1/sitemaps", c.ct, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var out wire.ErrorBody
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != c.code || out.Field != c.field || out.Error == "" {
			t.Errorf("%s %s: %d %+v, want %d field %q", c.ct, c.body, resp.StatusCode, out, c.code, c.field)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/sitemaps/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown run: %d", resp.StatusCode)
	}
}

func TestSitemapMalformedWritesNothing(t *testing.T) {
	e, srv := sitemapServer(t)
	var valid strings.Builder
	valid.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range 2500 { // more than one chunk before the damage
		fmt.Fprintf(&valid, "<url><loc>https://shop.test/p/%d</loc></url>\n", i)
	}
	for name, doc := range map[string]string{
		"truncated":    valid.String(),
		"half a tag":   valid.String() + "<url><loc>https://shop.test/x</lo",
		"mismatched":   valid.String() + "<url><loc>https://shop.test/x</url></loc></urlset>",
		"bad entity":   valid.String() + "<url><loc>https://shop.test/?a&nbsp;b</loc></url></urlset>",
		"two roots":    valid.String() + "</urlset><urlset></urlset>",
		"wrong root":   `<html><body>not a sitemap</body></html>`,
		"not xml":      "{\"url\": \"https://shop.test/\"}",
		"latin1":       `<?xml version="1.0" encoding="ISO-8859-1"?><urlset><url><loc>https://shop.test/</loc></url></urlset>`,
		"bad gzip":     string(gz(t, valid.String()+"</urlset>")[:200]),
		"text outside": valid.String() + "</urlset> trailing",
	} {
		run := waitRun(t, srv, postSitemap(t, srv, "application/xml", strings.NewReader(doc)))
		if run.Status != wire.RunFailed || run.Error == "" || run.Added.Count != 0 {
			t.Fatalf("%s: %+v", name, run)
		}
		t.Logf("%s: %s", name, run.Error)
		if n := len(e.AllRows()); n != 0 {
			t.Fatalf("%s: %d rows half-written", name, n)
		}
	}
}

// files serves sitemap files from a map, gzipping those named .gz, and counts the requests.
type files struct {
	mu   sync.Mutex
	m    map[string]string
	hits map[string]int
}

func (f *files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	body, ok := f.m[r.URL.Path]
	f.hits[r.URL.Path]++
	f.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case strings.HasSuffix(r.URL.Path, ".gz") || strings.HasSuffix(r.URL.Path, ".gzbin"):
		w.Write(gz(nil, body))
	default:
		io.WriteString(w, body)
	}
}

func index(locs ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		fmt.Fprintf(&b, "<sitemap><loc>%s</loc><lastmod>2026-11-29T00:00:00Z</lastmod></sitemap>\n", l)
	}
	return b.String() + "</sitemapindex>"
}

func urlset(prefix string, n int, freq string) string {
	var b strings.Builder
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range n {
		fmt.Fprintf(&b, "<url><loc>https://shop.test/%s/%d</loc><changefreq>%s</changefreq></url>\n", prefix, i, freq)
	}
	return b.String() + "</urlset>"
}

func TestSitemapIndexOfGzippedChildren(t *testing.T) {
	e, srv := sitemapServer(t)
	fs := &files{hits: map[string]int{}}
	site := httptest.NewServer(fs)
	defer site.Close()
	fs.m = map[string]string{
		"/sitemap.xml": index(site.URL+"/a.xml.gz", site.URL+"/b.gzbin", site.URL+"/c.xml",
			"https://evil.test/sitemap.xml", site.URL+"/missing.xml", site.URL+"/broken.xml.gz",
			site.URL+"/a.xml.gz", site.URL+"/nested.xml", site.URL+"/sitemap.xml"),
		"/a.xml.gz":      urlset("a", 1500, "daily"),
		"/b.gzbin":       urlset("b", 20, "weekly"), // gzip known by its magic, not its name
		"/c.xml":         urlset("c", 5, "hourly"),
		"/broken.xml.gz": urlset("broken", 10, "daily")[:300],
		"/nested.xml":    index(site.URL + "/d.xml.gz"),
		"/d.xml.gz":      urlset("d", 3, "monthly"),
	}
	run := waitRun(t, srv, postSitemapURL(t, srv, site.URL+"/sitemap.xml"))
	if run.Status != wire.RunDone || run.Added.Count != 1528 || run.Filtered.Count != 1 || run.Failed.Count != 2 {
		t.Fatalf("run %+v", run)
	}
	if run.Filtered.Sample[0] != "https://evil.test/sitemap.xml" || len(run.Added.Sample) != wire.SitemapSample {
		t.Fatalf("samples %+v", run)
	}
	reasons := fmt.Sprint(run.Failed.Sample)
	if !strings.Contains(reasons, "HTTP 404") || !strings.Contains(reasons, "broken.xml.gz") || !strings.Contains(reasons, "nothing of this file was stored") {
		t.Fatalf("failures %s", reasons)
	}
	if fs.hits["/a.xml.gz"] != 1 || fs.hits["/sitemap.xml"] != 1 {
		t.Fatalf("a file was read twice in one run: %v", fs.hits)
	}
	for u, want := range map[string]int64{"a/1499": 24 * hour, "b/0": 7 * 24 * hour, "c/4": 6 * hour, "d/2": 30 * 24 * hour} {
		if tg, err := e.Store.GetTarget([]byte("desktop|https://shop.test/" + u)); err != nil || tg.StoredIntervalMs != want {
			t.Fatalf("%s: %+v %v", u, tg, err)
		}
	}
	for _, u := range []string{"broken/0", "broken/1"} {
		if _, err := e.Store.GetSchedule([]byte("desktop|https://shop.test/" + u)); err == nil {
			t.Fatalf("%s of a truncated child was stored", u)
		}
	}
}

func TestSitemapDepthBeyondMaxDepth(t *testing.T) {
	e, srv := sitemapServer(t) // max_depth: 2 levels of index files
	fs := &files{hits: map[string]int{}}
	site := httptest.NewServer(fs)
	defer site.Close()
	fs.m = map[string]string{
		"/l1.xml":     index(site.URL+"/l2.xml", site.URL+"/ok1.xml"),
		"/l2.xml":     index(site.URL+"/l3.xml", site.URL+"/ok2.xml"),
		"/l3.xml":     index(site.URL + "/deep.xml"),
		"/ok1.xml":    urlset("ok1", 2, "daily"),
		"/ok2.xml":    urlset("ok2", 2, "daily"),
		"/deep.xml":   urlset("deep", 2, "daily"),
		"/direct.xml": urlset("direct", 1, "daily"),
	}
	run := waitRun(t, srv, postSitemapURL(t, srv, site.URL+"/l1.xml"))
	if run.Status != wire.RunDone || run.Added.Count != 4 || run.Failed.Count != 1 || !strings.Contains(run.Failed.Sample[0].Reason, "max_depth") {
		t.Fatalf("run %+v", run)
	}
	if fs.hits["/deep.xml"] != 0 {
		t.Fatal("a child beyond max_depth was fetched")
	}
	if _, err := e.Store.GetSchedule([]byte("desktop|https://shop.test/deep/0")); err == nil {
		t.Fatal("a URL beyond max_depth was stored")
	}

	// A redirect to a host outside render.domains is not followed.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	redir := httptest.NewServer(mux)
	defer redir.Close()
	run = waitRun(t, srv, postSitemapURL(t, srv, redir.URL+"/sitemap.xml"))
	if run.Status != wire.RunFailed || !strings.Contains(run.Error, "render.domains") {
		t.Fatalf("redirect: %+v", run)
	}
}

func TestSitemapGzipBombRefused(t *testing.T) {
	e, srv := sitemapServerYAML(t, strings.Replace(sitemapYAML, "16MiB", "1MiB", 1))
	var written atomic.Int64
	bomb := func(w http.ResponseWriter, r *http.Request) {
		// 1 GiB of zeros, compressed as it is sent: never held in memory on either side.
		zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		zeros := make([]byte, 64<<10)
		for range (1 << 30) / len(zeros) {
			if _, err := zw.Write(zeros); err != nil || r.Context().Err() != nil {
				return // the client hung up: it refused the bomb
			}
			written.Add(int64(len(zeros)))
		}
		zw.Close()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/bomb.xml.gz", bomb)
	mux.HandleFunc("/index.xml", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, index("http://"+r.Host+"/bomb.xml.gz", "http://"+r.Host+"/fine.xml"))
	})
	mux.HandleFunc("/fine.xml", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, urlset("fine", 3, "daily")) })
	site := httptest.NewServer(mux)
	defer site.Close()

	run := waitRun(t, srv, postSitemapURL(t, srv, site.URL+"/bomb.xml.gz"))
	if run.Status != wire.RunFailed || !strings.Contains(run.Error, "max_decompressed") {
		t.Fatalf("bomb: %+v", run)
	}
	run = waitRun(t, srv, postSitemapURL(t, srv, site.URL+"/index.xml"))
	if run.Status != wire.RunDone || run.Added.Count != 3 || run.Failed.Count != 1 || !strings.Contains(run.Failed.Sample[0].Reason, "max_decompressed") {
		t.Fatalf("bomb child: %+v", run)
	}
	t.Logf("the server compressed %d MiB of the 1024 MiB bomb before the client hung up", written.Load()>>20)
	if len(e.AllRows()) != 3*filedDevices {
		t.Fatalf("rows %d, want 3 URLs × %d devices", len(e.AllRows()), filedDevices)
	}
}

// A 50,000-URL sitemap end to end, served by a generator: fetched, spooled, parsed twice and
// upserted in chunks. Peak heap is sampled while the run proceeds; what grows is the store's
// memtable, not the ingest. Under the race detector each write is several times slower, so the
// file has 5,000 URLs there to keep go test -race fast.
func TestSitemap50kURLsFlatMemory(t *testing.T) {
	n := 50_000
	if invariants.Race || testing.Short() {
		n = 5_000
	}
	e, srv := sitemapServer(t)
	var size atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size.Store(qtest.WriteProducts(w, n))
	}))
	defer site.Close()
	var run wire.SitemapRun
	began := time.Now()
	base, peak := qtest.PeakHeap(func() { run = waitRun(t, srv, postSitemapURL(t, srv, site.URL+"/sitemap.xml")) })
	if run.Status != wire.RunDone || run.Added.Count != n || run.URLs != n {
		t.Fatalf("run %+v", run)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d URLs (%.1f MiB of XML) ingested in %v: heap in use %.1f MiB before, peak %.1f MiB (+%.1f MiB), %.1f MiB retained after a GC",
		n, qtest.MiB(uint64(size.Load())), time.Since(began).Round(time.Millisecond), qtest.MiB(base), qtest.MiB(peak), qtest.MiB(peak-min(peak, base)), qtest.MiB(ms.HeapInuse))
	if peak > base+96<<20 {
		t.Fatalf("heap grew by %.1f MiB importing %d URLs", qtest.MiB(peak-base), n)
	}
	if rows := len(e.AllRows()); rows != n*filedDevices {
		t.Fatalf("%d rows, want %d URLs × %d devices", rows, n, filedDevices)
	}
}

// A run submitted once the runs are stopped is refused with 503.
func TestSitemapPostAfterStopIs503(t *testing.T) {
	e := qtest.New(t, sitemapYAML, start, shm.Options{})
	s := newSitemaps(t, e, &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}, nil)
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s.Runs.Stop()
	resp, err := http.Post(srv.URL+"/v1/sitemaps", "application/xml", strings.NewReader(urlset("d", 1, "daily")))
	if err != nil {
		t.Fatal(err)
	}
	var e0 wire.ErrorBody
	json.NewDecoder(resp.Body).Decode(&e0)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e0.Error, "worker 0 is stopping") {
		t.Fatalf("a run after Stop: %d %+v", resp.StatusCode, e0)
	}
}

type writerFunc func([]store.Write) error

func (f writerFunc) WriteSchedules(ws []store.Write) error { return f(ws) }
func (f writerFunc) Modify([]store.Change) ([]bool, error) {
	return nil, errors.New("writerFunc has no Modify")
}

// filedDevices is how many targets a sitemap run that names no device files for each <url>:
// one for every device of the default configuration (desktop and mobile).
const filedDevices = 2
