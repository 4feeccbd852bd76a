package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Real prerender clients in front of a site, against the built binaries: the unmodified
// prerender-node Express middleware (pinned in testdata/prerender-node, installed with npm ci
// in the test's directory) and Debian's nginx with the recipe shipped as
// deploy/nginx-prerender.conf. Both skip on a machine without node/npm or nginx and fail where
// CI is set (.ci/run installs them).

const googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

// needTool returns the path of the first of names found, skipping the test when none is
// (failing it where CI is set).
func needTool(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and %s is missing", names[0])
	}
	t.Skipf("no %s here", names[0])
	return ""
}

type siteAnswer struct {
	code   int
	header http.Header
	body   string
}

// visit sends GET path to the site as userAgent would, without following redirects.
func visit(t *testing.T, site, path, userAgent string) siteAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, site+path, nil)
	req.Header.Set("User-Agent", userAgent)
	client := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return siteAnswer{resp.StatusCode, resp.Header, string(b)}
}

// startProcess runs cmd until the test ends, and waits until its output has a line holding
// ready ("" waits for nothing).
func startProcess(t *testing.T, cmd *exec.Cmd, ready string) {
	t.Helper()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(cmd) })
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		closed := false
		for sc.Scan() {
			t.Log(sc.Text())
			if !closed && ready != "" && strings.Contains(sc.Text(), ready) {
				close(seen)
				closed = true
			}
		}
	}()
	if ready == "" {
		return
	}
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never said %q", cmd.Path, ready)
	}
}

// stopProcess stops cmd with SIGTERM, so that nginx's master stops its workers (a SIGKILL
// would leave them running), and kills it if it has not exited within 10 s.
func stopProcess(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// expressSite installs the pinned packages and starts the Express app on a free port, its
// middleware pointed at serveAddr with token; it returns the site's base URL.
func expressSite(t *testing.T, dir, serveAddr, token string) string {
	t.Helper()
	port := freePort(t)
	_, p, _ := net.SplitHostPort(port)
	cmd := exec.Command("node", "app.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT="+p, "FRESHQ_SERVE=http://"+serveAddr+"/", "FRESHQ_SERVE_TOKEN="+token)
	startProcess(t, cmd, "listening")
	return "http://" + port
}

func npmInstall(t *testing.T) string {
	t.Helper()
	needTool(t, "node")
	dir := npmCI(t, "prerender-node")
	b, err := os.ReadFile(filepath.Join("testdata", "prerender-node", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.js"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func siteHits(t *testing.T, site, path string) int {
	t.Helper()
	var h struct{ Hits int }
	a := visit(t, site, "/__hits?path="+path, "test")
	if err := json.Unmarshal([]byte(a.body), &h); err != nil {
		t.Fatalf("hits: %q", a.body)
	}
	return h.Hits
}

func TestEndToEndPrerenderNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := npmInstall(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	site := expressSite(t, dir, serveAddr, "crawl-token")

	first := visit(t, site, "/p/1?x=1", googlebot)
	if first.code != 200 || !strings.Contains(first.body, "site page /p/1 for freshq/1") || first.header.Get("X-Freshq-Cache") != "miss" {
		t.Fatalf("first crawler request: %d %v %q", first.code, first.header, first.body)
	}
	second := visit(t, site, "/p/1?x=1", googlebot)
	if second.code != 200 || second.body != first.body || second.header.Get("X-Freshq-Cache") != "hit" {
		t.Fatalf("second crawler request: %d %v %q", second.code, second.header, second.body)
	}
	if h := siteHits(t, site, "/p/1"); h != 1 {
		t.Fatalf("the site served /p/1 %d times for two crawler requests, want 1 (freshq's render)", h)
	}
	// The site's own 404 page, as its render made it, not a stock one.
	if a := visit(t, site, "/gone", googlebot); a.code != 404 || !strings.Contains(a.body, "<p>gone</p>") {
		t.Fatalf("declared 404: %d %q", a.code, a.body)
	}
	if a := visit(t, site, "/moved", googlebot); a.code != 301 || a.header.Get("Location") != "https://elsewhere.example/new" {
		t.Fatalf("declared 301: %d %v", a.code, a.header)
	}
	human := visit(t, site, "/p/1?x=1", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0")
	if human.code != 200 || human.header.Get("X-Freshq-Cache") != "" || !strings.Contains(human.body, "for Mozilla/5.0 (X11") {
		t.Fatalf("a visitor: %d %v %q", human.code, human.header, human.body)
	}

	wrong := expressSite(t, dir, serveAddr, "not-the-token")
	a := visit(t, wrong, "/p/wrong", googlebot)
	if a.code != 403 || !strings.Contains(a.body, "X-Prerender-Token") {
		t.Fatalf("wrong token: %d %q", a.code, a.body)
	}
	if n.stored(t, wrong+"/p/wrong") || siteHits(t, wrong, "/p/wrong") != 0 {
		t.Fatal("a request with a wrong token filed or rendered its page")
	}
}

// nginxSite runs Debian's nginx with deploy/nginx-prerender.conf, its three CHANGE values
// set: the site's root (index.html only), freshq's listener and token. It returns the site's
// base URL.
func nginxSite(t *testing.T, serveAddr, token string) string {
	t.Helper()
	nginx := needTool(t, "nginx", "/usr/sbin/nginx")
	recipe, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nginx-prerender.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	os.MkdirAll(root, 0o755)
	// nginx's workers run as another user when it starts as root: they must reach the root.
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	os.WriteFile(filepath.Join(root, "index.html"), []byte("<!doctype html><title>shell</title><div id=app></div>"), 0o644)
	os.WriteFile(filepath.Join(root, "app.js"), []byte("document.title = 'app'"), 0o644)
	listen := freePort(t)
	conf := string(recipe)
	for old, new := range map[string]string{
		"server 127.0.0.1:3000;": "server " + serveAddr + ";",
		"listen 80;":             "listen " + listen + ";",
		"root /var/www/site;":    "root " + root + ";",
		`"CHANGE-ME"`:            `"` + token + `"`,
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("deploy/nginx-prerender.conf no longer holds %q", old)
		}
		conf = strings.Replace(conf, old, new, 1)
	}
	runNginx(t, nginx, dir, listen, conf)
	return "http://" + listen
}

// runNginx runs Debian's nginx (the binary nginx) with its prefix in dir, the http block
// holding httpConf, and waits until it listens on listen.
func runNginx(t *testing.T, nginx, dir, listen, httpConf string) {
	t.Helper()
	main := fmt.Sprintf(`pid %[1]s/nginx.pid;
error_log stderr info;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    default_type text/html;
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s
}
`, dir, httpConf)
	cfg := filepath.Join(dir, "nginx.conf")
	os.WriteFile(cfg, []byte(main), 0o600)
	startProcess(t, exec.Command(nginx, "-e", "stderr", "-p", dir, "-c", cfg, "-g", "daemon off;"), "")
	waitFor(t, "nginx listening", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func TestEndToEndNginxRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	site := nginxSite(t, serveAddr, "crawl-token")
	waitFor(t, "ready", 30*time.Second, n.ready)

	first := visit(t, site, "/c/shoes?page=2", googlebot)
	if first.code != 200 || !strings.Contains(first.body, "<title>shell</title>") || first.header.Get("X-Freshq-Cache") != "miss" {
		t.Fatalf("first crawler request: %d %v %q", first.code, first.header, first.body)
	}
	renders := n.metrics()[`freshq_render_total{outcome="ok"}`]
	second := visit(t, site, "/c/shoes?page=2", googlebot)
	if second.code != 200 || second.body != first.body || second.header.Get("X-Freshq-Cache") != "hit" {
		t.Fatalf("second crawler request: %d %v %q", second.code, second.header, second.body)
	}
	if !n.stored(t, site+"/c/shoes?page=2") {
		t.Fatal("the page the crawler asked for is not the target freshq filed (its URL differs)")
	}
	if now := n.metrics()[`freshq_render_total{outcome="ok"}`]; renders != 1 || now != 1 {
		t.Fatalf("renders: %v after the first request, %v after the second, want 1 and 1", renders, now)
	}
	// An escaped path reaches freshq escaped once, not twice.
	if a := visit(t, site, "/c/red%20shoes?size=42", googlebot); a.code != 200 || !n.stored(t, site+"/c/red%20shoes?size=42") {
		t.Fatalf("an escaped path: %d %q, or not filed under its URL", a.code, a.body)
	}
	human := visit(t, site, "/c/shoes?page=2", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0")
	if human.code != 200 || human.header.Get("X-Freshq-Cache") != "" || !strings.Contains(human.body, "<title>shell</title>") {
		t.Fatalf("a visitor: %d %v %q", human.code, human.header, human.body)
	}
	if a := visit(t, site, "/app.js", googlebot); a.code != 200 || a.header.Get("X-Freshq-Cache") != "" {
		t.Fatalf("a static file for a crawler: %d %v", a.code, a.header)
	}

	wrong := nginxSite(t, serveAddr, "not-the-token")
	if a := visit(t, wrong, "/c/wrong", googlebot); a.code != 403 || !strings.Contains(a.body, "X-Prerender-Token") {
		t.Fatalf("wrong token: %d %q", a.code, a.body)
	}
	if n.stored(t, wrong+"/c/wrong") {
		t.Fatal("a request with a wrong token filed its page")
	}
}
