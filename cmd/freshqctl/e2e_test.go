package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/testkit/testbin"
	"github.com/freshq/freshq/wire"
)

// binDir holds freshq-supervisor, freshq-worker and freshqctl, built once by TestMain unless
// -short (the end-to-end test is the only one that needs them).
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &binDir, "freshqctl-e2e-bin-", map[string]string{"freshq-supervisor": "../supervisor", "freshq-worker": "../worker", "freshqctl": "."}))
}

// ctl runs the built freshqctl against server.
func ctl(t *testing.T, server string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "freshqctl"), args...)
	cmd.Env = append(os.Environ(), "FRESHQ_SERVER="+server, "FRESHQ_TOKEN=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running freshqctl %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startSupervisor runs a real supervisor with the sim renderer on a temp data dir and a free
// port (extraYAML continues its render section, or adds sections of its own); it is stopped,
// and its shm segment removed, at the end of the test.
func startSupervisor(t *testing.T, extraYAML string) string {
	server, _ := newE2ENode(t).start(t, extraYAML)
	return server
}

// e2eNode is one data directory, listener, segment and runtime directory that supervisors are
// started on, one after the other if a test restarts it with another configuration.
type e2eNode struct {
	dir, addr, seg, rt string
}

func newE2ENode(t *testing.T) *e2eNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &e2eNode{dir: t.TempDir(), addr: ln.Addr().String()}
	ln.Close()
	n.seg = filepath.Join("/dev/shm", "freshqctl-e2e-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(n.dir)+".seg")
	// A runtime directory of its own (short: the socket's path must fit a unix socket address).
	if n.rt, err = os.MkdirTemp("", "fq"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(n.seg); os.Remove(n.seg + ".lock"); os.RemoveAll(n.rt) })
	return n
}

// start runs a supervisor on the node with extraYAML appended to its configuration (right
// after the render section), waits for it to be ready, and returns its address and a stop that
// drains it (SIGTERM) and waits; the test's cleanup calls stop too.
func (n *e2eNode) start(t *testing.T, extraYAML string) (server string, stop func()) {
	t.Helper()
	cfg := fmt.Sprintf(`data_dir: %s
listen: %s
workers: 2
shm: {path: %s}
log: {level: warn}
routes:
  - {name: catalog, match: prefix, path: /c/, interval: 24h}
render:
  renderer: sim
  concurrency: 4
  sim: {latency_median: 5ms}
%s`, n.dir, n.addr, n.seg, extraYAML)
	cfgPath := filepath.Join(n.dir, "freshq.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "freshq-supervisor"), "--config", cfgPath, "--worker-bin", filepath.Join(binDir, "freshq-worker"))
	cmd.Env = append(os.Environ(), "RUNTIME_DIRECTORY="+n.rt)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(40 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("the supervisor did not stop on SIGTERM")
		}
		if t.Failed() {
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			t.Logf("supervisor log:\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	}
	t.Cleanup(stop)
	server = "http://" + n.addr
	waitFor(t, "readiness", 30*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("the supervisor exited:\n%s", log.String())
		default:
		}
		resp, err := http.Get(server + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return server, stop
}

// TestAgainstARunningSupervisor drives the freshqctl binary against a real supervisor: add,
// import, sitemap, prioritize rush, explain, queue, cluster (on Badger) and top.
func TestAgainstARunningSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	sitemap := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://shop.test/c/s-1</loc><changefreq>daily</changefreq></url>
  <url><loc>https://shop.test/c/s-2</loc></url>
  <url><loc>https://elsewhere.test/x</loc></url>
</urlset>`
	sm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, sitemap)
	}))
	defer sm.Close()
	server := startSupervisor(t, "  domains: [shop.test, 127.0.0.1]\n")

	// add, then explain it until the sim renderer has rendered it.
	r := ctl(t, server, "", "add", "https://shop.test/c/added", "--interval", "6h", "--source", "sitemap")
	wantExit(t, r, 0, "")
	if r.stdout != "accepted https://shop.test/c/added (desktop)\n" {
		t.Fatalf("add: %q", r.stdout)
	}
	wantExit(t, ctl(t, server, "", "add", "ftp://shop.test/x"), 1, "freshqctl: url: must be an absolute http(s) URL")
	var ex wire.Explanation
	waitFor(t, "the added target's first render", 20*time.Second, func() bool {
		r := ctl(t, server, "", "explain", "https://shop.test/c/added", "--json")
		if r.code != 0 {
			t.Fatalf("explain --json: %+v", r)
		}
		if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil {
			t.Fatal(err)
		}
		return ex.LastRender != nil && ex.Page != nil
	})
	if ex.Cadence.Seconds != 6*3600 || ex.Source != "sitemap" {
		t.Fatalf("explained %+v", ex)
	}
	r = ctl(t, server, "", "explain", "https://shop.test/c/added")
	wantExit(t, r, 0, "")
	for _, want := range []string{"https://shop.test/c/added", "6h from", "status 200", "servable"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)
	wantExit(t, ctl(t, server, "", "explain", "https://shop.test/c/unknown"), 1, "freshqctl: url: no such target")

	// import: CSV from a file in chunks, one bad row; NDJSON from stdin.
	var csv strings.Builder
	csv.WriteString("url,device,interval,source\n")
	for i := range 1200 {
		if i == 700 {
			csv.WriteString("https://shop.test/c/i-bad,desktop,soon,api\n") // line 702
			continue
		}
		fmt.Fprintf(&csv, "https://shop.test/c/i-%04d,desktop,12h,sitemap\n", i)
	}
	path := filepath.Join(t.TempDir(), "targets.csv")
	os.WriteFile(path, []byte(csv.String()), 0o600)
	r = ctl(t, server, "", "import", path, "--chunk", "500")
	wantExit(t, r, 1, "freshqctl: 1 of 1200 items rejected")
	if !strings.Contains(r.stdout, "1200 items, 1199 accepted, 1 rejected") || !strings.Contains(r.stdout, "line 702: interval: ") {
		t.Fatalf("import summary:\n%s", r.stdout)
	}
	r = ctl(t, server, "{\"url\":\"https://shop.test/c/n-1\",\"device\":\"mobile\"}\n{\"url\":\"https://shop.test/c/n-2\"}\n", "import", "-", "--json")
	wantExit(t, r, 0, "")
	var sum importSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || sum.Accepted != 2 || sum.Rejected != 0 {
		t.Fatalf("import --json %q: %v", r.stdout, err)
	}
	wantExit(t, ctl(t, server, "", "explain", "https://shop.test/c/n-1", "--device", "mobile"), 0, "")

	// sitemap: a run fetched from a local server, followed to the end (or a clear error from a
	// server without sitemap ingestion).
	r = ctl(t, server, "", "sitemap", sm.URL+"/sitemap.xml", "--poll", "50ms")
	if r.code == 1 && strings.Contains(r.stderr, "not available") {
		t.Logf("no sitemap ingestion on this server: %s", r.stderr)
	} else {
		wantExit(t, r, 0, "")
		if !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "2 added") || !strings.Contains(r.stdout, "1 filtered") {
			t.Fatalf("sitemap:\n%s", r.stdout)
		}
		wantExit(t, ctl(t, server, "", "explain", "https://shop.test/c/s-1"), 0, "")
	}

	// prioritize rush: the target goes to the urgent lane until its next render.
	r = ctl(t, server, "", "prioritize", "https://shop.test/c/added", "--mode", "rush")
	if r.code == 1 && strings.Contains(r.stderr, "not available") {
		t.Logf("no prioritize on this server: %s", r.stderr)
	} else {
		wantExit(t, r, 0, "")
		if !strings.Contains(r.stdout, "rush https://shop.test/c/added: 1 target") {
			t.Fatalf("prioritize: %q", r.stdout)
		}
		wantExit(t, ctl(t, server, "", "prioritize", "--prefix", "https://shop.test/nothing/", "--mode", "wait"), 1, "freshqctl: prefix: no such target")
	}

	// queue: the table, and JSON that decodes as the API's type.
	r = ctl(t, server, "", "queue")
	wantExit(t, r, 0, "")
	for _, want := range []string{"FLOOR", "READY SET", "LANE", "submitted", "GRANTS", "LEASES"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("queue lacks %q:\n%s", want, r.stdout)
		}
	}
	fits(t, r.stdout)
	var q wire.QueueView
	r = ctl(t, server, "", "queue", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &q); err != nil || q.Leases.Capacity == 0 || q.Claims["ready"]+q.Claims["index"] == 0 {
		t.Fatalf("queue --json %q: %v", r.stdout, err)
	}

	// cluster: this supervisor runs on Badger, in no cluster; the server's error, on one line.
	wantExit(t, ctl(t, server, "", "cluster"), 1, "freshqctl: store.backend: this node is not in a cluster (store.backend is badger)")

	// top --once: one frame from the real /metrics.
	r = ctl(t, server, "", "top", "--once")
	wantExit(t, r, 0, "")
	if !strings.Contains(r.stdout, "renders ") || !strings.Contains(r.stdout, "discovered") {
		t.Fatalf("top --once:\n%s", r.stdout)
	}
	fits(t, r.stdout)
}
