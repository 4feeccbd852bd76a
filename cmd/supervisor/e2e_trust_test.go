package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/wire"
)

// These run the real supervisor and workers against hostile input on the newest surfaces: a
// configuration whose aliases stand for billions of nodes, fenced and forged results that
// name hosts, and a remote renderer's lease revoked while it holds a host's slot.

// postRaw sends body as is to the node's public listener.
func (n *node) postRaw(path string, body []byte) fenceAnswer {
	n.t.Helper()
	resp, err := http.Post("http://"+n.addr+path, "application/yaml", bytes.NewReader(body))
	if err != nil {
		n.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fenceAnswer{code: resp.StatusCode, body: b}
}

// rssOf is a process's resident set in bytes, from /proc.
func rssOf(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "statm"))
	if err != nil {
		t.Fatal(err)
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		t.Fatal(err)
	}
	return resident * int64(os.Getpagesize())
}

// The alias bomb (ten levels of ten aliases in render.user_agents) posted to POST /v1/plan took
// worker 0 past 5 GB; the same bytes given to a SIGHUP reload reached the supervisor. Now the
// plan is a 400 naming the alias's key and line, worker 0 stays the same process and small, and
// the reload is refused with the line while the running configuration stays in force.
func TestEndToEndAliasBombIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	bomb, err := os.ReadFile("../../config/testdata/alias-bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	chain, err := os.ReadFile("../../config/testdata/merge-chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "trust-bomb") // the segment is named after it: unique to this test
	os.Mkdir(dir, 0o700)
	n := launch(t, dir, 1, "")
	waitFor(t, "readiness", 60*time.Second, n.ready)
	seg := n.segment()
	w0 := workerPID(seg, 0)

	for _, tc := range []struct {
		body        []byte
		field, line string
	}{{bomb, "render.user_agents.a3[7]", "line 6"}, {chain, "x10.<<[0]", "line 11"}} {
		a := n.postRaw(wire.PathPlan, tc.body)
		var e wire.ErrorBody
		json.Unmarshal(a.body, &e)
		if a.code != http.StatusBadRequest || e.Field != tc.field || !strings.Contains(e.Error, tc.line) {
			t.Fatalf("POST %s: %d %s; want 400 naming %s at %s", wire.PathPlan, a.code, a.body, tc.field, tc.line)
		}
	}
	if !n.ready() || workerPID(seg, 0) != w0 {
		t.Fatalf("worker 0 did not survive: pid %d, was %d", workerPID(seg, 0), w0)
	}
	if rss := rssOf(t, w0); rss > 512<<20 {
		t.Fatalf("worker 0's resident set is %d MiB after the bombs", rss>>20)
	}

	// The same bytes as the file of a reload, inside a configuration that is otherwise good.
	for i, body := range [][]byte{bomb, chain} {
		writeNodeConfig(t, n.node, 1, string(body))
		n.cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, "the reload's refusal", 30*time.Second, func() bool {
			return n.logCount("reload refused", "aliases") == i+1
		})
	}
	if !n.logHas("reload refused", "line 13", "render.user_agents.a3[7]") {
		t.Fatal("the bomb's reload refusal does not name its line in the file (its line 6, after the 7 lines before it)")
	}
	if n.logHas("configuration reloaded") {
		t.Fatal("a bomb was reloaded")
	}
	if rss := rssOf(t, n.cmd.Process.Pid); rss > 512<<20 {
		t.Fatalf("the supervisor's resident set is %d MiB after the reloads", rss>>20)
	}
	// The running configuration is in force: a good file still reloads, and the node serves.
	writeNodeConfig(t, n.node, 1, "")
	n.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "a good reload", 30*time.Second, func() bool { return n.logHas("configuration reloaded") })
	if !n.ready() || workerPID(seg, 0) != w0 {
		t.Fatal("the node stopped serving")
	}
	select {
	case err := <-n.exited:
		t.Fatalf("the supervisor exited: %v", err)
	default:
	}
}
