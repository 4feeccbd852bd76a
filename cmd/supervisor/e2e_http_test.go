package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
)

// The public listener's trust boundary, against the real supervisor and worker 0: what a web
// page in the operator's browser can do to it (nothing but read), a rebinding Host, the headers
// of a served page, slow and idle clients, and /readyz's connections to worker 0.

// apiAnswer is one response, its body read and closed.
type apiAnswer struct {
	code   int
	header http.Header
	body   []byte
}

// do sends one request to the node with the given headers ("Host" sets the Host header).
func (n *node) do(method, path, body string, header map[string]string) apiAnswer {
	n.t.Helper()
	req, err := http.NewRequest(method, "http://"+n.addr+path, strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiAnswer{resp.StatusCode, resp.Header, b}
}

// jsonError checks that a is a JSON API error naming field.
func (a apiAnswer) jsonError(t *testing.T, what string, code int, field string) {
	t.Helper()
	var e struct{ Error, Field string }
	if a.code != code || json.Unmarshal(a.body, &e) != nil || e.Error == "" || e.Field != field {
		t.Fatalf("%s: %d %s, want %d with a JSON error naming %q", what, a.code, a.body, code, field)
	}
}

// seedPages stores pages for the given URLs (catalog route, rendered now, due in an hour).
func seedPages(t *testing.T, dataDir string, pages map[string]store.Page) {
	st, err := badgerstore.Open(filepath.Join(dataDir, "db"), &badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := clock.NowMs()
	var ws []store.Write
	for u, pg := range pages {
		key := []byte("desktop|" + u)
		sch, err := store.NewSchedule(key, now+3600_000, false, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		pg.RenderedAtMs = now
		ws = append(ws, store.Write{Schedule: sch, Target: &store.Target{URL: u, Device: "desktop", Source: store.SourceAPI}, Page: &pg})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
}

func TestEndToEndBrowserCannotWriteOrRebind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	seedPages(t, dir, map[string]store.Page{
		"https://shop.test/c/page": {Status: 200, Body: []byte("<script>fetch('/v1/targets',{method:'DELETE'})</script>"),
			Headers: []store.Header{{Name: "content-type", Value: "text/html"}}},
		"https://shop.test/c/zero": {Status: 0, Body: []byte("<html>stored with status 0</html>")},
	})
	n := startNode(t, dir, 1, "http: {hosts: [freshq.test]}\n", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	host := n.addr
	explain := func(u string) int {
		return n.do("GET", "/v1/targets?url="+url.QueryEscape(u), "", nil).code
	}
	evil := `[{"url": "https://shop.test/c/evil"}]`

	// A page on another site posts text/plain (no preflight): refused, nothing written.
	a := n.do("POST", "/v1/targets", evil, map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
	a.jsonError(t, "cross-site text/plain POST", http.StatusForbidden, "Sec-Fetch-Site")
	// An older browser that sends only Origin.
	a = n.do("POST", "/v1/targets", evil, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"})
	a.jsonError(t, "cross-origin form POST", http.StatusForbidden, "Origin")
	// The results endpoint, where a forged lease once reached shared memory, is refused the same way.
	a = n.do("POST", "/v1/results", `{"results": []}`, map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
	a.jsonError(t, "cross-site results POST", http.StatusForbidden, "Sec-Fetch-Site")
	if code := explain("https://shop.test/c/evil"); code != http.StatusNotFound {
		t.Fatalf("after refused posts the target exists: explain %d", code)
	}

	// DNS rebinding: same-origin to the browser, but Host names the attacker's domain.
	a = n.do("POST", "/v1/targets", evil, map[string]string{"Host": "evil.example:" + portOf(host), "Origin": "http://evil.example:" + portOf(host), "Sec-Fetch-Site": "same-origin"})
	a.jsonError(t, "rebinding POST", http.StatusMisdirectedRequest, "Host")
	n.do("GET", "/v1/queue", "", map[string]string{"Host": "evil.example:" + portOf(host)}).jsonError(t, "rebinding GET", http.StatusMisdirectedRequest, "Host")
	if code := explain("https://shop.test/c/evil"); code != http.StatusNotFound {
		t.Fatalf("after a rebinding post the target exists: explain %d", code)
	}
	// The listener's own forms and a configured name are answered.
	for _, h := range []string{host, "localhost:" + portOf(host), "freshq.test:" + portOf(host), "FRESHQ.TEST"} {
		if a := n.do("GET", "/v1/queue", "", map[string]string{"Host": h}); a.code != http.StatusOK {
			t.Fatalf("Host %s: %d %s", h, a.code, a.body)
		}
	}

	// What curl --data-binary @file sends: a form Content-Type, no Origin. It works.
	a = n.do("POST", "/v1/targets", `[{"url": "https://shop.test/c/curl"}]`, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "curl/8.5.0", "Accept": "*/*"})
	if a.code != http.StatusOK || explain("https://shop.test/c/curl") != http.StatusOK {
		t.Fatalf("curl-like POST: %d %s", a.code, a.body)
	}

	// A stored page is served with nosniff and a CSP that runs no script.
	a = n.do("GET", "/v1/pages?url="+url.QueryEscape("https://shop.test/c/page"), "", nil)
	if a.code != http.StatusOK || a.header.Get("X-Content-Type-Options") != "nosniff" || a.header.Get("Content-Security-Policy") != api.PageCSP ||
		a.header.Get("Content-Type") != "text/html" {
		t.Fatalf("page: %d %v", a.code, a.header)
	}
	// A page stored with status 0 is a 502 with a JSON error, and worker 0 lives on.
	pid := workerPID(n.segment(), 0)
	n.do("GET", "/v1/pages?url="+url.QueryEscape("https://shop.test/c/zero"), "", nil).jsonError(t, "status-0 page", http.StatusBadGateway, "")
	if got := workerPID(n.segment(), 0); got != pid || !n.ready() {
		t.Fatalf("worker 0 was %d, is %d", pid, got)
	}
}

func portOf(hostport string) string {
	_, port, _ := net.SplitHostPort(hostport)
	return port
}

// openFDs counts the open file descriptors of a process.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// /readyz asks worker 0 over its unix socket; 500 probes must not leave 500 connections open.
func TestEndToEndReadyzReusesItsConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 1, "", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	w0 := workerPID(n.segment(), 0)
	before := openFDs(t, w0)
	for i := range 500 {
		if a := n.do("GET", "/readyz", "", nil); a.code != http.StatusOK {
			t.Fatalf("probe %d: %d %s", i, a.code, a.body)
		}
	}
	after := openFDs(t, w0)
	t.Logf("worker 0 fds: %d before 500 /readyz, %d after", before, after)
	if after > before+10 {
		t.Fatalf("worker 0 went from %d to %d open fds over 500 /readyz", before, after)
	}
}

// Every bound of the public listener holds against a slow client: headers sent slower than
// http.read_header_timeout, a body slower than read_timeout (except on a bulk endpoint, within
// bulk_timeout), an answer read slower than write_timeout, and a keep-alive connection idle
// past idle_timeout are all cut. The bounds are far apart (1 s, 1 s, 2 s, 10 s, 30 s), so a
// generous window around each cut still tells which bound made it.
func TestEndToEndSlowClientsAreCut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := t.TempDir()
	const bigPage = 30 << 20 // more than loopback's socket buffers hold
	seedPages(t, dir, map[string]store.Page{"https://shop.test/c/big": {Status: 200, Body: []byte(strings.Repeat("x", bigPage))}})
	n := startNode(t, dir, 1, "http: {read_header_timeout: 1s, read_timeout: 10s, write_timeout: 2s, bulk_timeout: 30s, idle_timeout: 1s}\n", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	dial := func() (net.Conn, chan time.Duration, time.Time) {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, make(chan time.Duration, 1), time.Now()
	}
	cutWithin := func(what string, got, bound time.Duration) {
		t.Helper()
		if got < bound*9/10 || got > bound+4*time.Second {
			t.Fatalf("%s cut after %v, want about %v (the next bound is far later)", what, got, bound)
		}
	}

	// Slowloris: one header byte every 100 ms, for up to 20 s, against a 1 s bound (read_timeout,
	// 10 s, would cut it too, later).
	c, closed, start := dial()
	go func() {
		io.Copy(io.Discard, c) // returns once the server closes the connection
		closed <- time.Since(start)
	}()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: ", n.addr)
	sent := 0
	var cutAfter time.Duration
slow:
	for ; sent < 200; sent++ {
		select {
		case cutAfter = <-closed:
			break slow
		case <-time.After(100 * time.Millisecond): // the client's own pace
		}
		if _, err := c.Write([]byte("a")); err != nil {
			cutAfter = <-closed
			break
		}
	}
	if sent >= 200 {
		t.Fatal("a connection sending its headers a byte per 100 ms was still open after 20 s")
	}
	t.Logf("slowloris connection cut after %v and %d header bytes", cutAfter, sent)
	cutWithin("a slowloris connection", cutAfter, time.Second)

	// Idle past idle_timeout after an answer: closed (read_timeout would close it later).
	c, closed, _ = dial()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", n.addr)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	answered := time.Now()
	go func() {
		io.Copy(io.Discard, br)
		closed <- time.Since(answered)
	}()
	select {
	case idle := <-closed:
		t.Logf("idle connection closed after %v", idle)
		cutWithin("an idle keep-alive connection", idle, time.Second)
	case <-time.After(20 * time.Second):
		t.Fatal("an idle keep-alive connection was still open 20 s past idle_timeout (1s)")
	}

	// An answer nobody reads: a client with a tiny receive buffer asks for the big page and does
	// not read. The server's writes block; at write_timeout the server gives up and closes its
	// end, which /proc/net/tcp shows leaving ESTABLISHED while the page is still unsent. Only
	// then does the client read: it gets what the buffers held, well short of the page.
	c = dialTinyBuffer(t, n.addr)
	fmt.Fprintf(c, "GET /v1/pages?url=%s HTTP/1.1\r\nHost: %s\r\n\r\n", url.QueryEscape("https://shop.test/c/big"), n.addr)
	start = time.Now()
	waitFor(t, "the server to close a connection whose answer is not read", 30*time.Second, func() bool {
		return serverSideState(t, c) != tcpEstablished
	})
	cutAfter = time.Since(start)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.Copy(io.Discard, c)
	t.Logf("a reader that did not read: cut after %v, then got %d of %d page bytes (%v)", cutAfter, got, bigPage, err)
	if got >= bigPage || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %d bytes, %v: the answer was not cut at write_timeout", got, err)
	}
	cutWithin("an answer nobody reads", cutAfter, 2*time.Second)

	// A body that stops after its first item: accepted on a bulk endpoint, where it may take
	// longer than read_timeout and write_timeout, and cut at read_timeout (10 s) on another. The
	// bulk upload starts first, so once the other is cut it has been open longer than
	// read_timeout: it is then finished, and must be accepted.
	bulk := startHeldBody(t, n.addr, "/v1/targets")
	other := startHeldBody(t, n.addr, "/v1/discover")
	var res heldResult
	select {
	case res = <-other.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a held body to a non-bulk endpoint was still open 30 s later")
	}
	t.Logf("held body to a non-bulk endpoint: %d, %v after %v", res.code, res.err, res.after)
	if res.err == nil && res.code < 400 {
		t.Fatalf("a held body to a non-bulk endpoint was answered %d", res.code)
	}
	cutWithin("a held body to a non-bulk endpoint", res.after, 10*time.Second)
	select {
	case res = <-bulk.done:
		t.Fatalf("the bulk upload ended before its body did: %d %v after %v", res.code, res.err, res.after)
	default:
	}
	bulk.finish()
	select {
	case res = <-bulk.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the bulk upload was not answered")
	}
	t.Logf("held bulk upload: %d, %v after %v", res.code, res.err, res.after)
	if res.err != nil || res.code != http.StatusOK || res.after < 10*time.Second {
		t.Fatalf("a bulk upload held past read_timeout: %d %v after %v, want 200", res.code, res.err, res.after)
	}
}

// heldBody is a request whose body the test holds open after its first item, on a connection
// of its own: the server's closing it is seen at once, by the read of the answer.
type heldBody struct {
	c    net.Conn
	rest string
	done chan heldResult
}

type heldResult struct {
	code  int
	err   error
	after time.Duration
}

func startHeldBody(t *testing.T, addr, path string) *heldBody {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	first, rest := `[{"url": "https://shop.test/c/held-0"}`, `, {"url": "https://shop.test/c/held-1"}]`
	h := &heldBody{c: c, rest: rest, done: make(chan heldResult, 1)}
	start := time.Now()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, addr, len(first)+len(rest), first)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			h.done <- heldResult{err: err, after: time.Since(start)}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h.done <- heldResult{code: resp.StatusCode, after: time.Since(start)}
	}()
	return h
}

// finish sends the rest of the body.
func (h *heldBody) finish() { io.WriteString(h.c, h.rest) }

// dialTinyBuffer connects with the smallest receive buffer the kernel allows, so that an answer
// it does not read fills the buffers soon.
func dialTinyBuffer(t *testing.T, addr string) net.Conn {
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const tcpEstablished = 1 // /proc/net/tcp's st of an established connection

// serverSideState is the TCP state (/proc/net/tcp's st) of the far end of c, a connection to a
// loopback IPv4 listener in this network namespace; 0 once that socket is gone.
func serverSideState(t *testing.T, c net.Conn) int {
	hexAddr := func(a *net.TCPAddr) string {
		return fmt.Sprintf("%08X:%04X", binary.LittleEndian.Uint32(a.IP.To4()), a.Port)
	}
	local, remote := hexAddr(c.RemoteAddr().(*net.TCPAddr)), hexAddr(c.LocalAddr().(*net.TCPAddr))
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == local && f[2] == remote {
			st, err := strconv.ParseInt(f[3], 16, 32)
			if err != nil {
				t.Fatalf("/proc/net/tcp: %q", line)
			}
			return int(st)
		}
	}
	return 0
}

// At most http.max_conns connections are served at once; the next waits until one closes.
func TestEndToEndConnectionCap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	n := startNode(t, t.TempDir(), 1, "http: {max_conns: 4, idle_timeout: 1m}\n", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	http.DefaultClient.CloseIdleConnections() // the readiness probes' connections held slots

	get := func(c net.Conn, limit time.Duration) error {
		c.SetDeadline(time.Now().Add(limit))
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", n.addr); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var held []net.Conn
	for i := range 4 {
		c, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c, 20*time.Second); err != nil { // a keep-alive connection: its slot stays taken
			t.Fatalf("connection %d: %v", i, err)
		}
		held = append(held, c)
	}
	fifth, err := net.Dial("tcp", n.addr) // the kernel accepts it; the server does not, yet
	if err != nil {
		t.Fatal(err)
	}
	defer fifth.Close()
	if err := get(fifth, 500*time.Millisecond); err == nil {
		t.Fatal("a fifth connection was served with http.max_conns 4")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("fifth connection: %v, want no answer yet", err)
	}
	held[0].Close()
	fifth.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(fifth), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after a slot freed, the fifth connection: %v %v", resp, err)
	}
	resp.Body.Close()
}
