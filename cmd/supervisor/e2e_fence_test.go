package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These run the real supervisor and workers, for the fencing of results: what a result, a
// forged lease or a duplicate delivery can do to worker 0, and what the exec renderer stores.

type fenceAnswer struct {
	code int
	body []byte
}

// call sends a JSON request to the node's public listener, as curl would.
func (n *node) call(method, path string, body any) fenceAnswer {
	n.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+n.addr+path, rd)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fenceAnswer{code: resp.StatusCode, body: b}
}

func (a fenceAnswer) field() string {
	var e struct{ Field string }
	json.Unmarshal(a.body, &e)
	return e.Field
}

type wireLease struct {
	Slot    uint64 `json:"slot"`
	State   uint64 `json:"state"`
	KeyHash uint64 `json:"key_hash"`
}

type wireResult struct {
	Key     []byte    `json:"key"`
	Outcome string    `json:"outcome"`
	Status  int       `json:"status,omitempty"`
	Body    []byte    `json:"body,omitempty"`
	Lease   wireLease `json:"lease"`
}

// A lease slot past the table used to kill worker 0 (SIGSEGV in Release): six such requests
// ended the supervisor with exit 3. Now each is a 400 naming the lease, and worker 0 serves on,
// the same process.
func TestEndToEndForgedLeaseSlotIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := filepath.Join(t.TempDir(), "fence-slot") // the segment is named after it: unique to this test
	os.Mkdir(dir, 0o700)
	keys := seed(t, dir, 3)
	n := startNode(t, dir, 1, "queue: {max_leases: 64}\n", "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	seg := n.segment()
	w0 := workerPID(seg, 0)
	for i, slot := range []uint64{64, 65, 1 << 20, 1<<32 - 1, 64, 1<<32 - 1, 1000} {
		a := n.call("POST", "/v1/results", map[string]any{"results": []wireResult{
			{Key: []byte(keys[0]), Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: wireLease{Slot: slot, State: 1 << 40, KeyHash: 1}},
		}})
		if a.code != http.StatusBadRequest || a.field() != "results[0].lease" {
			t.Fatalf("request %d, slot %d: %d %s, want 400 naming results[0].lease", i, slot, a.code, a.body)
		}
	}
	if !n.ready() || workerPID(seg, 0) != w0 {
		t.Fatalf("worker 0 did not survive: pid %d, was %d", workerPID(seg, 0), w0)
	}
	if m := n.metrics(); m[`freshq_worker_restarts_total{worker="0"}`] != 0 {
		t.Fatalf("worker 0 restarted %v times", m[`freshq_worker_restarts_total{worker="0"}`])
	}
	select {
	case err := <-n.exited:
		t.Fatalf("the supervisor exited: %v", err)
	default:
	}
}

// The example, against the binaries: one 404 posted twice sealed a sitemap page as
// gone for 14 days (gone takes two strikes). The second delivery is fenced: 409, and the
// target's failure count stays 1.
func TestEndToEndDuplicateResultIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := filepath.Join(t.TempDir(), "fence-dup") // the segment is named after it: unique to this test
	os.Mkdir(dir, 0o700)
	seed(t, dir, 1)
	n := startNode(t, dir, 1, "", "") // worker 0 alone: nothing else claims the row
	waitFor(t, "readiness", 60*time.Second, n.ready)
	var claimed struct {
		Jobs []struct {
			Key   []byte    `json:"key"`
			URL   string    `json:"url"`
			Lease wireLease `json:"lease"`
		} `json:"jobs"`
	}
	waitFor(t, "a job", 30*time.Second, func() bool {
		a := n.call("POST", "/v1/claim", map[string]any{"limit": 1})
		return a.code == 200 && json.Unmarshal(a.body, &claimed) == nil && len(claimed.Jobs) == 1
	})
	job := claimed.Jobs[0]
	result := map[string]any{"results": []wireResult{{Key: job.Key, Outcome: "not_found", Status: 404, Lease: job.Lease}}}
	if a := n.call("POST", "/v1/results", result); a.code != 200 || !strings.Contains(string(a.body), `"applied":1`) {
		t.Fatalf("first delivery: %d %s", a.code, a.body)
	}
	if a := n.call("POST", "/v1/results", result); a.code != http.StatusConflict || a.field() != "results[0].lease" {
		t.Fatalf("second delivery: %d %s, want 409 naming results[0].lease", a.code, a.body)
	}
	a := n.call("GET", "/v1/targets?url="+url.QueryEscape(job.URL), nil)
	var ex struct {
		Failures *struct{ Count int } `json:"failures"`
		Terminal *struct{ State string }
	}
	if err := json.Unmarshal(a.body, &ex); err != nil || a.code != 200 {
		t.Fatalf("explain: %d %s", a.code, a.body)
	}
	if ex.Failures == nil || ex.Failures.Count != 1 || ex.Terminal != nil {
		t.Fatalf("after a duplicate 404: failures %+v terminal %+v, want one failure and no seal", ex.Failures, ex.Terminal)
	}
}

// The exec set-up of docs/RENDERING.md serves pages: a command that prints HTML renders, and GET /v1/pages
// answers 200 with the page (a stored status 0 made it panic in WriteHeader).
func TestEndToEndExecRendererServesPages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := filepath.Join(t.TempDir(), "fence-exec") // the segment is named after it: unique to this test
	os.Mkdir(dir, 0o700)
	script := filepath.Join(dir, "render.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '<html><body>rendered %s</body></html>' \"$1\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, dir, 2, fmt.Sprintf("render: {renderer: exec, domains: [\"127.0.0.1\"], exec: {command: [%q]}}\n", script), "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	const page = "http://127.0.0.1/c/exec-page"
	if a := n.call("POST", "/v1/targets", []map[string]string{{"url": page}}); a.code != 200 {
		t.Fatalf("add target: %d %s", a.code, a.body)
	}
	var got fenceAnswer
	waitFor(t, "the rendered page", 60*time.Second, func() bool {
		got = n.call("GET", "/v1/pages?url="+url.QueryEscape(page), nil)
		return got.code != http.StatusNotFound
	})
	if got.code != 200 || string(got.body) != "<html><body>rendered "+page+"</body></html>" {
		t.Fatalf("GET /v1/pages: %d %q", got.code, got.body)
	}
}
