package chrome

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// The egress proxy serves only its own browsers: a request or a tunnel without a live browser's
// credentials (none, a wrong secret, those of a browser that has closed) is refused with 407
// before anything is dialled, and the credentials never reach the origin.
func TestEgressRequiresTheBrowsersCredentials(t *testing.T) {
	var hits, withProxyAuth atomic.Int64
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Proxy-Authorization") != "" {
			withProxyAuth.Add(1)
		}
		_, _ = w.Write([]byte("origin"))
	}))
	var dials atomic.Int64 // connections the origin's listener accepted, tunnels included
	origin.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	origin.Start()
	defer origin.Close()
	e, err := startEgress([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	user, secret := e.newCredentials()
	oldUser, oldSecret := e.newCredentials()
	e.revoke(oldUser)
	originHost := strings.TrimPrefix(origin.URL, "http://")

	get := func(creds *url.Userinfo) int {
		t.Helper()
		proxy := &url.URL{Scheme: "http", Host: e.addr(), User: creds}
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}}
		resp, err := c.Get(origin.URL + "/page")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	connect := func(auth string) int {
		t.Helper()
		conn, err := net.Dial("tcp", e.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := "CONNECT " + originHost + " HTTP/1.1\r\nHost: " + originHost + "\r\n"
		if auth != "" {
			req += "Proxy-Authorization: " + auth + "\r\n"
		}
		if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	basic := func(u, p string) string {
		r := &http.Request{Header: http.Header{}}
		r.SetBasicAuth(u, p)
		return r.Header.Get("Authorization")
	}

	for name, creds := range map[string]*url.Userinfo{
		"no credentials":        nil,
		"a wrong secret":        url.UserPassword(user, secret+"x"),
		"an unknown user":       url.UserPassword("browser-x", secret),
		"a closed browser's":    url.UserPassword(oldUser, oldSecret),
		"the user with no pass": url.User(user),
	} {
		if code := get(creds); code != http.StatusProxyAuthRequired {
			t.Errorf("GET with %s: %d, want 407", name, code)
		}
	}
	for name, auth := range map[string]string{
		"no credentials":     "",
		"a wrong secret":     basic(user, "nope"),
		"a closed browser's": basic(oldUser, oldSecret),
		"another scheme":     "Bearer " + secret,
	} {
		if code := connect(auth); code != http.StatusProxyAuthRequired {
			t.Errorf("CONNECT with %s: %d, want 407", name, code)
		}
	}
	if n, d := hits.Load(), dials.Load(); n != 0 || d != 0 {
		t.Fatalf("refused connections reached the origin: %d requests, %d connections", n, d)
	}

	if code := get(url.UserPassword(user, secret)); code != http.StatusOK {
		t.Errorf("GET with the browser's credentials: %d, want 200", code)
	}
	if code := connect(basic(user, secret)); code != http.StatusOK {
		t.Errorf("CONNECT with the browser's credentials: %d, want 200", code)
	}
	if hits.Load() != 1 || withProxyAuth.Load() != 0 {
		t.Errorf("origin saw %d requests, %d with Proxy-Authorization; want 1, none", hits.Load(), withProxyAuth.Load())
	}
}
