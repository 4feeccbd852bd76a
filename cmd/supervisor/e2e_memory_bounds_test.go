package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// These run the real supervisor and worker 0 under what a stranger can send the crawler
// listener (a site's prerender middleware forwards any crawler's request to it) and the admin
// listener, and measure worker 0's resident set (VmRSS of /proc/<pid>/status) against a
// ceiling: each attack is scaled down from the one that took worker 0 to gigabytes so that it
// runs in seconds, with a ceiling in proportion.

// flood sends count GETs of the crawler listener, from workers keep-alive connections, of the
// URLs target(i) yields, with the crawl token; it returns how many got each status.
func flood(t *testing.T, serveAddr string, count, workers int, target func(i int) string) map[int]int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true},
		Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+serveAddr, nil)
				req.URL.Opaque = target(i)
				req.Header.Set("X-Prerender-Token", "crawl-token")
				req.Header.Set("User-Agent", "Googlebot/2.1")
				code := -1
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

// Per-page request counting took worker 0 from 35 MB to 1.81 GB for 100,000 GETs of distinct
// 7.9 KB URLs, none of which the store can hold (its keys are at most 2,048 bytes): every
// request was counted, twice (the generation's and the flush's maps), before the lookup, in
// maps bounded by keys, not bytes. Scaled to 20,000 such URLs (316 MB of keys counted twice)
// and 20,000 distinct valid 2 KB ones that are never stored (a miss past serve.miss_rate's
// burst is refused), worker 0 must grow by less than 96 MiB: nothing of either is counted, and
// the counts that are kept fit serve.demand_bytes.
func TestEndToEndRequestCountsAreBoundedByBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	origin := newSiteOrigin(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, "freshness: {demand_flush: 1s}\n"), "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	w0 := workerPID(n.segment(), 0)
	if a := crawl(t, serveAddr, "/"+origin.URL+"/p/warm"); a.code != 200 {
		t.Fatalf("a first page: %d %q", a.code, a.body)
	}
	before := residentBytes(w0)

	long := strings.Repeat("a", 7900)
	codes := flood(t, serveAddr, 20_000, 4, func(i int) string {
		return fmt.Sprintf("/%s/p/%d?q=%s", origin.URL, i, long)
	})
	valid := strings.Repeat("b", 1950)
	for k, v := range flood(t, serveAddr, 20_000, 4, func(i int) string {
		return fmt.Sprintf("/%s/v/%d?q=%s", origin.URL, i, valid)
	}) {
		codes[k] += v
	}
	after := residentBytes(w0)
	t.Logf("worker 0: %d MiB before, %d MiB after 40,000 requests of URLs never stored (answers %v)", before>>20, after>>20, codes)
	if codes[-1] > 0 || codes[200] > 100 {
		t.Fatalf("answers %v: want every request answered, the misses past serve.miss_burst refused", codes)
	}
	if workerPID(n.segment(), 0) != w0 {
		t.Fatal("worker 0 restarted under the requests")
	}
	if grew := after - before; grew > 96<<20 {
		t.Fatalf("worker 0 grew by %d MiB counting requests for pages it does not store, want under 96 MiB", grew>>20)
	}
}

// dialFrom connects to addr from the loopback address from (127.0.0.x: each is a peer of its
// own to the listener).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends one raw request on c and reads its answer within limit.
func exchange(c net.Conn, br *bufio.Reader, req string, limit time.Duration) (*http.Response, error) {
	c.SetDeadline(time.Now().Add(limit))
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// 512 keep-alive connections that each sent one GET without a token, got 401 and stayed open
// held every one of the crawler listener's http.max_conns slots for the idle timeout (2 min):
// a crawler with the right token then timed out. The admin listener had the same pattern.
// Scaled to http.max_conns 64, on both listeners, from a peer of its own (127.0.0.2): a refusal
// now closes its connection, and 64 connections that send nothing are held at most
// http.max_unauthenticated (16) at a time, so a request with the token from another peer
// (127.0.0.1) is answered while the attacker's connections are open. Its 15 s deadline only
// turns the hang into a failure: the connections would otherwise be held for 30 s (headers)
// and 2 minutes (idle).
func TestEndToEndTokenlessConnectionsLeaveRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 1, serveYAML(serveAddr,
		"token: admin-token\nhttp: {max_conns: 64, max_unauthenticated: 16, read_header_timeout: 30s}\n"), "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	http.DefaultClient.CloseIdleConnections() // the readiness probes' connections held slots
	w0 := workerPID(n.segment(), 0)
	before := residentBytes(w0)

	for _, l := range []struct {
		name, addr, tokenless, withToken string
	}{
		{"crawler listener", serveAddr,
			"GET /http://elsewhere.test/p HTTP/1.1\r\nHost: x\r\nUser-Agent: Googlebot\r\n\r\n",
			"GET /http://elsewhere.test/p HTTP/1.1\r\nHost: x\r\nUser-Agent: Googlebot\r\nX-Prerender-Token: crawl-token\r\n\r\n"},
		{"admin listener", n.addr,
			"GET /v1/queue HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
			"GET /v1/queue HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-token\r\n\r\n"},
	} {
		t.Run(l.name, func(t *testing.T) {
			// 64 connections that send one request without the token each, and would keep it.
			for i := range 64 {
				c := dialFrom(t, "127.0.0.2", l.addr)
				br := bufio.NewReader(c)
				resp, err := exchange(c, br, l.tokenless, 15*time.Second)
				if err != nil {
					t.Fatalf("tokenless request %d: %v", i, err)
				}
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("tokenless request %d: %d, want 401", i, resp.StatusCode)
				}
				if !resp.Close {
					t.Fatalf("tokenless request %d: answered without Connection: close (%v)", i, resp.Header)
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("tokenless request %d: the server kept its connection open after the 401 (%v)", i, err)
				}
			}
			// 64 more that send nothing at all.
			for range 64 {
				dialFrom(t, "127.0.0.2", l.addr)
			}
			c := dialFrom(t, "127.0.0.1", l.addr)
			resp, err := exchange(c, bufio.NewReader(c), l.withToken, 15*time.Second)
			if err != nil {
				t.Fatalf("a request with the token, beside 128 tokenless connections: %v", err)
			}
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				t.Fatalf("a request with the token: %d", resp.StatusCode)
			}
		})
	}
	after := residentBytes(w0)
	t.Logf("worker 0: %d MiB before, %d MiB after", before>>20, after>>20)
	if grew := after - before; grew > 64<<20 {
		t.Fatalf("worker 0 grew by %d MiB under tokenless connections, want under 64 MiB", grew>>20)
	}
}

// bigHTML is n bytes of HTML that gzip compresses about as much as a real page.
func bigHTML(n int) []byte {
	var b bytes.Buffer
	b.WriteString("<!doctype html><title>big</title>")
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "<p class=\"row-%d\">item %d costs %d.%02d</p>\n", i%97, i, (i*7919)%1000, i%100)
	}
	return b.Bytes()[:n]
}

// gzipped is body compressed, as intake.CompressPage stores it.
func gzipped(t *testing.T, body []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(body)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A page stored gzipped, asked for by a client that does not accept gzip, was decompressed
// whole per request: 150 connections asking a 9 MiB page without Accept-Encoding and never
// reading took worker 0 from 240 MB to 4.03 GB (about 25 MB a connection), and each HEAD
// decompressed the page to learn its length. Scaled to 24 such connections (some 600 MB
// before), worker 0 must grow by less than 64 MiB: the page is streamed through a gzip reader,
// its Content-Length the plain length stored with it, and a HEAD decompresses nothing. A page
// stored before the plain length was recorded is streamed too, without Content-Length.
func TestEndToEndGzippedPageIsStreamedToPlainClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	plain := bigHTML(9 << 20)
	z := gzipped(t, plain)
	gz := []store.Header{{Name: "content-type", Value: "text/html; charset=utf-8"}, {Name: "content-encoding", Value: "gzip"}}
	seedPages(t, dir, map[string]store.Page{
		"https://shop.test/c/big": {Status: 200, Headers: gz, Body: z, PlainLen: int64(len(plain))},
		"https://shop.test/c/old": {Status: 200, Headers: gz, Body: z}, // stored before page v2
	})
	serveAddr := freePort(t)
	n := startNode(t, dir, 1, fmt.Sprintf("serve: {listen: %s, tokens: [crawl-token]}\n", serveAddr), "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	w0 := workerPID(n.segment(), 0)

	before := residentBytes(w0)

	// 200 HEADs, then 24 connections that ask and do not read.
	for range 200 {
		c := dialTinyBuffer(t, serveAddr)
		resp, err := exchange(c, bufio.NewReader(c), "HEAD /https://shop.test/c/big HTTP/1.1\r\nHost: x\r\nX-Prerender-Token: crawl-token\r\nConnection: close\r\n\r\n", 15*time.Second)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(plain)) {
			t.Fatalf("HEAD: %v %v", resp, err)
		}
		c.Close()
	}
	for i := range 24 {
		c := dialTinyBuffer(t, serveAddr)
		fmt.Fprintf(c, "GET /https://shop.test/c/big HTTP/1.1\r\nHost: x\r\nX-Prerender-Token: crawl-token\r\n\r\n")
		// One byte read: the server is writing the page, and blocks once the buffers are full.
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	after := residentBytes(w0)
	t.Logf("worker 0: %d MiB before, %d MiB with 24 plain clients not reading a %d MiB page stored gzipped (%d MiB)",
		before>>20, after>>20, len(plain)>>20, len(z)>>20)
	if grew := after - before; grew > 64<<20 {
		t.Fatalf("worker 0 grew by %d MiB for 24 clients of a gzipped page, want under 64 MiB", grew>>20)
	}

	// What a plain client gets: the page, whole, with its length when it was recorded.
	for _, tc := range []struct {
		path, length string
	}{{"/https://shop.test/c/big", strconv.Itoa(len(plain))}, {"/https://shop.test/c/old", ""}} {
		a := crawl(t, serveAddr, tc.path)
		if a.code != 200 || a.body != string(plain) || a.header.Get("Content-Length") != tc.length || a.header.Get("Content-Encoding") != "" {
			t.Fatalf("GET %s without gzip: %d, %d bytes, Content-Length %q Content-Encoding %q; want the %d plain bytes, Content-Length %q",
				tc.path, a.code, len(a.body), a.header.Get("Content-Length"), a.header.Get("Content-Encoding"), len(plain), tc.length)
		}
	}
}

// A megabyte POST /v1/plan of nested flow sequences ("- [[[…]]]", 2,000 deep a line) took
// worker 0 from 1.8 to 5.96 GB and was answered 400 after 9.7 s: the file was parsed three or
// four times before anything looked at its depth. Scaled to 128 KiB (some 700 MB before),
// worker 0 must grow by less than 64 MiB: the depth is bounded by a scan of the bytes before
// any parse, and the refusal names the line.
func TestEndToEndDeeplyNestedPlanIsRefusedBeforeParsing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 1, "", "")
	waitFor(t, "ready", 60*time.Second, n.ready)
	w0 := workerPID(n.segment(), 0)
	before := residentBytes(w0)

	// The bomb at full size (just under wire.MaxPlanBody), sent again and again: each is
	// refused by the scan, so repeated bombs cannot take worker 0 past the supervisor's restart
	// intensity either.
	line := "- " + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + "\n"
	body := []byte("workers: 2\nroutes:\n" + strings.Repeat(line, (wire.MaxPlanBody-64)/len(line)))
	var a fenceAnswer
	for range 5 {
		a = n.postRaw(wire.PathPlan, body)
	}
	after := residentBytes(w0)
	t.Logf("worker 0: %d MiB before, %d MiB after five %d KiB plans nested 2,000 deep: %d %.200s", before>>20, after>>20, len(body)>>10, a.code, a.body)
	if workerPID(n.segment(), 0) != w0 {
		t.Fatal("worker 0 restarted")
	}
	if grew := after - before; grew > 64<<20 {
		t.Fatalf("worker 0 grew by %d MiB refusing a nested plan, want under 64 MiB", grew>>20)
	}
	var e wire.ErrorBody
	json.Unmarshal(a.body, &e)
	if a.code != http.StatusBadRequest || e.Field != "body" || !strings.Contains(e.Error, "line 3") {
		t.Fatalf("POST %s: %d %s; want 400 naming the body and its line 3", wire.PathPlan, a.code, a.body)
	}
}
