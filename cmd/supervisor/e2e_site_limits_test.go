package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store"
)

// siteLimitsYAML is a node whose crawler listener renders on miss for the site render.domains
// names, localhost, with a burst of 20 new targets and a rate (one an hour and more) that
// refills no token while the test runs, so that what a site may file is exactly its burst.
func siteLimitsYAML(serveAddr string) string {
	return fmt.Sprintf(`queue: {ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  domains: ["localhost"]
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
  miss_burst: 20
  miss_rate: 0.0001
`, serveAddr)
}

// One site, one limit, against the built binaries: the crawler listener faces the internet, so
// any spelling of a page's URL reaches it.
//
//   - 30 spellings of one page's port (leading zeros: localhost:0P, :00P, …) are one key: one
//     render, one fetch at the origin, one row; every one is served the page, and the plain
//     spelling then hits the cache.
//   - Ports outside 1–65535 are refused, 400 naming url, and file nothing.
//   - Distinct ports of one domain share the site's miss limit: 200 new pages under 200 ports
//     of localhost file what is left of the site's burst (19, after the page above) and no more;
//     the rest are 503 with Retry-After, naming url.
//   - The store holds exactly those rows (read back after the stop), every key canonical.
func TestEndToEndOneSiteOneLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const burst = 20
	origin := newSiteOrigin(t)
	port := origin.URL[strings.LastIndexByte(origin.URL, ':')+1:]
	dir := t.TempDir()
	serveAddr := freePort(t)
	n := startNode(t, dir, 2, siteLimitsYAML(serveAddr), "")
	waitFor(t, "ready", 30*time.Second, n.ready)

	// One page under 30 spellings of its port.
	codes := map[int]int{}
	for i := 1; i <= 30; i++ {
		a := crawl(t, serveAddr, "/http://localhost:"+strings.Repeat("0", i)+port+"/same-page")
		codes[a.code]++
		if a.code != 200 || !strings.Contains(a.body, "rendered /same-page") {
			t.Errorf("spelling %d: %d %q", i, a.code, a.body)
		}
	}
	if a := crawl(t, serveAddr, "/http://localhost:"+port+"/same-page"); a.code != 200 || a.header.Get("X-Freshq-Cache") != "hit" {
		t.Errorf("the plain spelling after the 30: %d %s, want 200 from the cache", a.code, a.header.Get("X-Freshq-Cache"))
	}
	fetches := origin.hitsOf("/same-page")
	t.Logf("30 port spellings of one page: answers %v, %d fetches at the origin", codes, fetches)
	if fetches != 1 {
		t.Errorf("%d fetches at the origin for one page under 30 spellings, want 1", fetches)
	}

	// Ports that are no port.
	for _, bad := range []string{"99999", "65536", "0", "00000"} {
		a := crawl(t, serveAddr, "/http://localhost:"+bad+"/no-port")
		var e struct{ Error, Field string }
		if json.Unmarshal([]byte(a.body), &e); a.code != 400 || e.Field != "url" {
			t.Errorf("port %s: %d %q, want 400 naming url", bad, a.code, a.body)
		}
	}

	// 200 new pages of one domain under 200 ports: nothing listens there, so each render on miss
	// fails (502); what counts is what was filed, and what was refused at once.
	filed, limited := 0, 0
	for p := 20001; p <= 20200; p++ {
		a := crawl(t, serveAddr, fmt.Sprintf("/http://localhost:%d/p", p))
		var e struct{ Error, Field string }
		switch json.Unmarshal([]byte(a.body), &e); {
		case a.code == 503 && e.Field == "url" && a.header.Get("Retry-After") != "" && strings.Contains(e.Error, "serve.miss_rate"):
			limited++
		case a.code == 503:
			t.Errorf("port %d: 503 %q, not the site's miss limit", p, a.body)
		default:
			filed++
		}
	}
	t.Logf("200 ports of localhost: %d filed, %d refused by the site's miss limit", filed, limited)
	if filed != burst-1 || limited != 200-(burst-1) {
		t.Errorf("200 ports of localhost: %d filed and %d limited, want %d and %d (the site's burst left)", filed, limited, burst-1, 200-(burst-1))
	}

	// The rows, read back after the stop.
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n.exited:
		if err != nil {
			t.Fatalf("supervisor: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor did not exit")
	}
	st := badgerIn(dir).open(t)
	defer st.Close()
	rows, samePage, urgent := 0, 0, 0
	err := st.ForEachSchedule(nil, func(key []byte, row store.Row) error {
		rows++
		_, u, _ := cachekey.Split(key)
		if strings.HasSuffix(u, "/same-page") {
			samePage++
		}
		if norm, err := cachekey.NormalizeURL(u); err != nil || norm != u {
			t.Errorf("a stored key is not canonical: %q (→ %q, %v)", key, norm, err)
		}
		if pu, err := url.Parse(u); err == nil && pu.Port() == "99999" {
			t.Errorf("a refused port was filed: %q", key)
		}
		if row.Lanes.Urgent {
			urgent++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("store: %d rows, %d of them /same-page, %d in the urgent lane", rows, samePage, urgent)
	if samePage != 1 || rows != burst {
		t.Errorf("store: %d rows of /same-page and %d in all, want 1 and %d (one site's burst)", samePage, rows, burst)
	}
}
