package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/testkit/testdns"
)

const page = `<!doctype html><html><head><title>hello</title></head><body><p>hello</p></body></html>`

// origin is an httptest server with a mux and a request counter.
type origin struct {
	*httptest.Server
	mux  *http.ServeMux
	hits atomic.Int64
}

func newOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{mux: http.NewServeMux()}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		o.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

func newHTTP(t *testing.T, mutate func(*Options)) *HTTP {
	t.Helper()
	cfg := testConfig("http")
	cfg.Timeout = 10 * time.Second
	cfg.Domains = []string{"127.0.0.1"} // the origins are httptest servers on loopback
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.transport.Proxy = nil // the tests talk to local origins only, whatever the environment says
	t.Cleanup(h.CloseIdleConnections)
	return h
}

func render(h Renderer, url string) Result {
	return h.Render(context.Background(), Request{Key: []byte("desktop|" + url), URL: url, Device: "desktop"})
}

func expect(t *testing.T, res Result, o outcome.Outcome, stage string, status int) {
	t.Helper()
	if res.Outcome != o || res.Stage != stage || res.Status != status {
		t.Fatalf("got %s at %q with status %d (err %q); want %s at %q with status %d", res.Outcome, res.Stage, res.Status, res.Err, o, stage, status)
	}
	if (o == outcome.OK) != (res.Err == "") {
		t.Fatalf("Err %q for outcome %s", res.Err, o)
	}
	if o != outcome.OK && o != outcome.Noindex && res.Body != nil {
		t.Fatalf("a %s result carries a body", o)
	}
}

func TestHTTPPageWithHeaders(t *testing.T) {
	o := newOrigin(t)
	var gotUA, gotAccept sync.Map
	o.mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		gotUA.Store(r.URL.Query().Get("d"), r.UserAgent())
		gotAccept.Store(r.URL.Query().Get("d"), r.Header.Get("Accept"))
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Language", "de")
		h.Set("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT")
		h.Set("ETag", `"abc"`)
		h.Set("Cache-Control", "max-age=300")
		h.Set("Set-Cookie", "s=1")
		h.Set("X-Powered-By", "php")
		io.WriteString(w, page)
	})
	o.mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/page?d=desktop#frag", http.StatusMovedPermanently)
	})
	h := newHTTP(t, func(c *Options) { c.UserAgents = map[string]string{"mobile": "freshq-mobile/1"} })

	res := render(h, o.URL+"/moved")
	expect(t, res, outcome.OK, StageBody, 200)
	if string(res.Body) != page {
		t.Fatalf("body %q", res.Body)
	}
	if res.FinalURL != o.URL+"/page?d=desktop#frag" {
		t.Errorf("FinalURL %q", res.FinalURL)
	}
	want := map[string]string{"content-type": "text/html; charset=utf-8", "content-language": "de",
		"last-modified": "Wed, 21 Oct 2015 07:28:00 GMT", "etag": `"abc"`, "cache-control": "max-age=300"}
	if len(res.Headers) != len(want) {
		t.Errorf("headers %v, want %v", res.Headers, want)
	}
	for k, v := range want {
		if res.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, res.Headers[k], v)
		}
	}
	if res.Duration <= 0 {
		t.Error("no duration")
	}

	res = h.Render(context.Background(), Request{URL: o.URL + "/page?d=mobile", Device: "mobile"})
	expect(t, res, outcome.OK, StageBody, 200)
	if ua, _ := gotUA.Load("desktop"); ua != "freshq/1 (+render queue)" {
		t.Errorf("desktop User-Agent %q", ua)
	}
	if ua, _ := gotUA.Load("mobile"); ua != "freshq-mobile/1" {
		t.Errorf("mobile User-Agent %q", ua)
	}
	if acc, _ := gotAccept.Load("desktop"); !strings.HasPrefix(acc.(string), "text/html") {
		t.Errorf("Accept %q", acc)
	}
}

func TestHTTPStatuses(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.Header().Set("Retry-After", "120")
		w.Header().Set("Location", "") // a 3xx without a target is returned as is
		w.WriteHeader(code)
		io.WriteString(w, "an error page that must not be kept")
	})
	h := newHTTP(t, nil)
	for _, tc := range []struct {
		code int
		want outcome.Outcome
	}{
		{404, outcome.NotFound},
		{410, outcome.Gone},
		{400, outcome.ClientError},
		{401, outcome.ClientError},
		{403, outcome.ClientError},
		{451, outcome.ClientError},
		{408, outcome.ServerError}, // 408, 425 and 429 say "try later": retryable
		{425, outcome.ServerError},
		{429, outcome.ServerError},
		{500, outcome.ServerError},
		{502, outcome.ServerError},
		{503, outcome.ServerError},
		{504, outcome.ServerError},
		{300, outcome.Failed},
		{304, outcome.Failed},
	} {
		res := render(h, fmt.Sprintf("%s/status/%d", o.URL, tc.code))
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			expect(t, res, tc.want, StageHeaders, tc.code)
			if !strings.Contains(res.Err, strconv.Itoa(tc.code)) {
				t.Errorf("Err %q does not name the status", res.Err)
			}
			if tc.code >= 400 && res.Headers["retry-after"] != "120" {
				t.Errorf("retry-after not kept: %v", res.Headers)
			}
		})
	}
}

func TestHTTPEmptyBodyFails(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	o.mux.HandleFunc("/200", func(w http.ResponseWriter, r *http.Request) {})
	h := newHTTP(t, nil)
	expect(t, render(h, o.URL+"/204"), outcome.Failed, StageBody, 204)
	expect(t, render(h, o.URL+"/200"), outcome.Failed, StageBody, 200)
}

func TestHTTPTimeoutWaitingForHeaders(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	h := newHTTP(t, func(c *Options) { c.Timeout = 50 * time.Millisecond })
	res := render(h, o.URL+"/hang")
	expect(t, res, outcome.Timeout, StageHeaders, 0)
	if !strings.Contains(res.Err, "render.timeout 50ms") {
		t.Errorf("Err %q", res.Err)
	}
	if res.Duration < 50*time.Millisecond {
		t.Errorf("returned after %s, before the timeout", res.Duration)
	}
}

func TestHTTPTimeoutCoversTheBody(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><head>")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	})
	h := newHTTP(t, func(c *Options) { c.Timeout = 50 * time.Millisecond })
	expect(t, render(h, o.URL+"/slow-body"), outcome.Timeout, StageBody, 200)
}

func TestHTTPCallerCancels(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) })
	h := newHTTP(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := h.Render(ctx, Request{URL: o.URL + "/"})
	expect(t, res, outcome.Timeout, StageDial, 0)
	if !strings.Contains(res.Err, "canceled") {
		t.Errorf("Err %q does not say the caller cancelled", res.Err)
	}
}

func TestHTTPRedirectLoop(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusFound) })
	o.mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/a#again", http.StatusFound) })
	o.mux.HandleFunc("/self", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/self", http.StatusMovedPermanently)
	})
	h := newHTTP(t, nil)
	res := render(h, o.URL+"/a")
	expect(t, res, outcome.RedirectLoop, StageHeaders, 302)
	if !strings.Contains(res.Err, "loop") || res.FinalURL != o.URL+"/b" || res.Headers != nil {
		t.Errorf("got %+v", res)
	}
	if n := o.hits.Load(); n != 2 {
		t.Errorf("%d requests; the loop should be caught before the third", n)
	}
	expect(t, render(h, o.URL+"/self"), outcome.RedirectLoop, StageHeaders, 301)
}

func TestHTTPTooManyRedirects(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/r/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		if n == 3 {
			io.WriteString(w, page)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n+1), http.StatusTemporaryRedirect)
	})
	o.mux.HandleFunc("/endless/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/endless/"))
		http.Redirect(w, r, fmt.Sprintf("/endless/%d", n+1), http.StatusFound)
	})

	h := newHTTP(t, func(c *Options) { c.MaxRedirects = 3 })
	res := render(h, o.URL+"/r/0") // exactly max_redirects hops: fine
	expect(t, res, outcome.OK, StageBody, 200)
	if res.FinalURL != o.URL+"/r/3" {
		t.Errorf("FinalURL %q", res.FinalURL)
	}
	o.hits.Store(0)
	res = render(h, o.URL+"/endless/0")
	expect(t, res, outcome.RedirectLoop, StageHeaders, 302)
	if !strings.Contains(res.Err, "max_redirects (3)") || o.hits.Load() != 4 || res.FinalURL != o.URL+"/endless/3" {
		t.Errorf("after %d requests: %+v", o.hits.Load(), res)
	}

	none := newHTTP(t, func(c *Options) { c.MaxRedirects = 0 })
	expect(t, render(none, o.URL+"/r/2"), outcome.RedirectLoop, StageHeaders, 307)
}

func TestHTTPRedirectOutsideTheAllowlistIsBlocked(t *testing.T) {
	o := newOrigin(t)
	other := newOrigin(t) // also on 127.0.0.1, but reached as "localhost", which is not listed
	other.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "internal secrets") })
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	o.mux.HandleFunc("/out", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+"/admin", http.StatusFound)
	})
	o.mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	o.mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) })
	h := newHTTP(t, func(c *Options) { c.Domains = []string{"127.0.0.1"} })

	expect(t, render(h, o.URL+"/ok"), outcome.OK, StageBody, 200)
	res := render(h, o.URL+"/out")
	expect(t, res, outcome.Blocked, StagePolicy, 302)
	if !strings.Contains(res.Err, `"localhost"`) || res.FinalURL != o.URL+"/out" {
		t.Errorf("got %+v", res)
	}
	if n := other.hits.Load(); n != 0 {
		t.Fatalf("the host off the list was contacted %d times", n)
	}
	expect(t, render(h, o.URL+"/file"), outcome.Failed, StageHeaders, 302)

	// The first URL is checked too, before any I/O.
	o.hits.Store(0)
	res = render(h, otherURL+"/admin")
	expect(t, res, outcome.Blocked, StagePolicy, 0)
	if other.hits.Load() != 0 {
		t.Fatal("a blocked first URL was fetched")
	}
}

func TestHTTPRedirectWithinTheAllowlistByName(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.Host {
		case "example.test":
			http.Redirect(w, r, "http://www.example.test/home", http.StatusMovedPermanently)
		case "www.example.test":
			http.Redirect(w, r, "http://evil.test/", http.StatusFound)
		}
	})
	o.mux.HandleFunc("/home", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host+page) })
	h := newHTTP(t, func(c *Options) { c.Domains = []string{"example.test"} })
	var dialled sync.Map
	var d net.Dialer
	h.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialled.Store(addr, true)
		return d.DialContext(ctx, network, o.Listener.Addr().String()) // every name resolves to the origin
	}

	res := render(h, "http://example.test/")
	expect(t, res, outcome.OK, StageBody, 200)
	if res.FinalURL != "http://www.example.test/home" || !bytes.HasPrefix(res.Body, []byte("www.example.test")) {
		t.Errorf("got %q from %s", res.Body, res.FinalURL)
	}
	res = render(h, "http://www.example.test/")
	expect(t, res, outcome.Blocked, StagePolicy, 302)
	if _, ok := dialled.Load("evil.test:80"); ok {
		t.Fatal("evil.test was dialled")
	}
}

func TestHTTPOversizedBody(t *testing.T) {
	const limit = 1024
	o := newOrigin(t)
	o.mux.HandleFunc("/len/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/len/"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(bytes.Repeat([]byte("a"), n))
	})
	o.mux.HandleFunc("/chunked/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/chunked/"))
		for i := 0; i < n; i += 100 {
			w.Write(bytes.Repeat([]byte("a"), min(100, n-i)))
			w.(http.Flusher).Flush()
		}
	})
	o.mux.HandleFunc("/gzip-bomb", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			t.Error("the transport did not offer gzip")
		}
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(make([]byte, 1<<20)) // 1 MiB of zeros, ~1 KiB compressed
		zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(zb.Len()))
		w.Write(zb.Bytes())
	})
	o.mux.HandleFunc("/noindex-huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Robots-Tag", "noindex")
		w.Write(bytes.Repeat([]byte("a"), 4*limit))
	})
	h := newHTTP(t, func(c *Options) { c.MaxBody = limit })

	res := render(h, fmt.Sprintf("%s/len/%d", o.URL, limit))
	expect(t, res, outcome.OK, StageBody, 200)
	if len(res.Body) != limit {
		t.Fatalf("%d bytes", len(res.Body))
	}
	expect(t, render(h, fmt.Sprintf("%s/chunked/%d", o.URL, limit)), outcome.OK, StageBody, 200)
	expect(t, render(h, fmt.Sprintf("%s/len/%d", o.URL, limit+1)), outcome.TooLarge, StageBody, 200)
	expect(t, render(h, fmt.Sprintf("%s/len/%d", o.URL, 100*limit)), outcome.TooLarge, StageBody, 200)
	expect(t, render(h, fmt.Sprintf("%s/chunked/%d", o.URL, limit+1)), outcome.TooLarge, StageBody, 200)
	expect(t, render(h, o.URL+"/gzip-bomb"), outcome.TooLarge, StageBody, 200)
	res = render(h, o.URL+"/noindex-huge") // the header is evidence enough
	expect(t, res, outcome.Noindex, StageHeaders, 200)
	if res.Body != nil {
		t.Error("a body over the limit was kept")
	}
}

func TestHTTPNoindex(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Robots-Tag", "bingbot: noarchive")
		w.Header().Add("X-Robots-Tag", r.URL.Query().Get("v"))
		io.WriteString(w, page)
	})
	o.mux.HandleFunc("/meta", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("ct"))
		fmt.Fprintf(w, `<html><head><title>x</title><meta name="%s" content="%s"></head><body>hi</body></html>`,
			r.URL.Query().Get("name"), r.URL.Query().Get("content"))
	})
	h := newHTTP(t, nil)
	for _, tc := range []struct {
		path  string
		want  outcome.Outcome
		stage string
	}{
		{"/header?v=noindex", outcome.Noindex, StageHeaders},
		{"/header?v=googlebot:+noindex", outcome.Noindex, StageHeaders},
		{"/header?v=nofollow,+noindex", outcome.Noindex, StageHeaders},
		{"/header?v=none", outcome.Noindex, StageHeaders},
		{"/header?v=otherbot:+noindex", outcome.OK, StageBody},
		{"/header?v=nofollow", outcome.OK, StageBody},
		{"/meta?name=robots&content=noindex,follow&ct=text/html", outcome.Noindex, StageBody},
		{"/meta?name=googlebot&content=NOINDEX&ct=", outcome.Noindex, StageBody},
		{"/meta?name=robots&content=index&ct=text/html", outcome.OK, StageBody},
		{"/meta?name=robots&content=noindex&ct=application/json", outcome.OK, StageBody}, // not HTML: no meta tags
	} {
		res := render(h, o.URL+tc.path)
		t.Run(tc.path, func(t *testing.T) {
			expect(t, res, tc.want, tc.stage, 200)
			if len(res.Body) == 0 {
				t.Error("no body")
			}
		})
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := newHTTP(t, nil)
	res := render(h, "http://"+addr+"/")
	expect(t, res, outcome.Network, StageDial, 0)
	if !strings.Contains(res.Err, "refused") || strings.Contains(res.Err, `Get "`) {
		t.Errorf("Err %q", res.Err)
	}

	// Refused on the second hop: the stage and FinalURL are that hop's.
	o := newOrigin(t)
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+addr+"/moved", http.StatusFound)
	})
	res = render(h, o.URL+"/")
	expect(t, res, outcome.Network, StageDial, 0)
	if res.FinalURL != "http://"+addr+"/moved" {
		t.Errorf("FinalURL %q", res.FinalURL)
	}
}

func TestHTTPConnectionDroppedMidBody(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "<html>only part")
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	o.mux.HandleFunc("/nothing", func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	h := newHTTP(t, nil)
	expect(t, render(h, o.URL+"/cut"), outcome.Network, StageBody, 200)
	expect(t, render(h, o.URL+"/nothing"), outcome.Network, StageHeaders, 0)
}

func TestHTTPUntrustedCertificate(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is the point
	srv.StartTLS()
	defer srv.Close()
	h := newHTTP(t, nil)
	res := render(h, srv.URL+"/")
	expect(t, res, outcome.Failed, StageDial, 0)
	if !strings.HasPrefix(res.Err, "tls: ") {
		t.Errorf("Err %q", res.Err)
	}
}

func TestHTTPBadURLs(t *testing.T) {
	h := newHTTP(t, nil)
	for _, u := range []string{"", "example.com/page", "ftp://example.com/", "http:///path", "file:///etc/passwd", "http://[::1/", "javascript:alert(1)"} {
		res := render(h, u)
		expect(t, res, outcome.Failed, StageRequest, 0)
		if res.FinalURL != u {
			t.Errorf("%q: FinalURL %q", u, res.FinalURL)
		}
	}
}

func TestHTTPConcurrentRendersShareTheTransport(t *testing.T) {
	o := newOrigin(t)
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) })
	h := newHTTP(t, nil)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if res := render(h, fmt.Sprintf("%s/p/%d", o.URL, i)); res.Outcome != outcome.OK {
				t.Errorf("render %d: %s %s", i, res.Outcome, res.Err)
			}
		})
	}
	wg.Wait()
}

func TestClassifyErr(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want outcome.Outcome
	}{
		{&net.DNSError{Err: "no such host", Name: "nx.example", IsNotFound: true}, outcome.Network},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, outcome.Network},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, outcome.Network},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.EHOSTUNREACH}, outcome.Network},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ETIMEDOUT}, outcome.Timeout},
		{fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF), outcome.Network},
		{io.EOF, outcome.Network},
		{x509.UnknownAuthorityError{}, outcome.Failed},
		{x509.HostnameError{Certificate: &x509.Certificate{}, Host: "x"}, outcome.Failed},
		{timeoutErr{}, outcome.Timeout},
		{errors.New("something else"), outcome.Failed},
	} {
		if got, _ := classifyErr(tc.err); got != tc.want {
			t.Errorf("classifyErr(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// An internal address is dialled only when render.domains lists it: the address itself, or the
// name being dialled exactly. The check is on the resolved address, on every hop.
func TestHTTPInternalAddressesOnlyWhenListed(t *testing.T) {
	o := newOrigin(t)
	_, port, _ := net.SplitHostPort(o.Listener.Addr().String())
	o.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) })
	o.mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://www.example.test:"+port+"/", http.StatusFound)
	})
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	testdns.Use(t, map[string][]netip.Addr{"example.test": loopback, "www.example.test": loopback, "rebind.test": loopback})

	// Not listed: refused at dial time, the origin never contacted, the error naming the policy.
	for _, tc := range []struct {
		domains []string
		url     string
	}{
		{nil, o.URL + "/"},                                                  // any host, but loopback is not listed
		{nil, "http://localhost:" + port + "/"},                             // a name that resolves to loopback
		{nil, "http://rebind.test:" + port + "/"},                           // passes every URL check, resolves inside
		{[]string{"example.test"}, "http://www.example.test:" + port + "/"}, // a subdomain of a listed name
	} {
		h := newHTTP(t, func(c *Options) { c.Domains = tc.domains })
		res := render(h, tc.url)
		expect(t, res, outcome.Blocked, StagePolicy, 0)
		if !strings.Contains(res.Err, "address policy (render.domains)") || strings.Contains(res.Err, port) ||
			strings.Contains(res.Err, "dial") || strings.Contains(res.Err, `Get "`) {
			t.Errorf("%q under %q: Err %q", tc.url, tc.domains, res.Err)
		}
	}
	if n := o.hits.Load(); n != 0 {
		t.Fatalf("the origin was contacted %d times", n)
	}

	// Listed: the address, or the name itself.
	expect(t, render(newHTTP(t, func(c *Options) { c.Domains = []string{"example.test", "127.0.0.1"} }), "http://www.example.test:"+port+"/"), outcome.OK, StageBody, 200)
	expect(t, render(newHTTP(t, func(c *Options) { c.Domains = []string{"example.test"} }), "http://example.test:"+port+"/"), outcome.OK, StageBody, 200)

	// A redirect from a listed name to a subdomain that resolves inside: the URL passes the
	// allowlist, the dial does not.
	o.hits.Store(0)
	h := newHTTP(t, func(c *Options) { c.Domains = []string{"example.test"} })
	res := render(h, "http://example.test:"+port+"/hop")
	expect(t, res, outcome.Blocked, StagePolicy, 0) // the refused hop has no response
	if res.FinalURL != "http://www.example.test:"+port+"/" || o.hits.Load() != 1 {
		t.Errorf("FinalURL %q after %d hits", res.FinalURL, o.hits.Load())
	}
}
