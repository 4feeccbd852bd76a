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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/shm"
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

// claimOne claims one job through POST /v1/claim as a remote renderer would.
func (n *node) claimOne(renderer string) (key []byte, lease wireLease) {
	n.t.Helper()
	var claimed struct {
		Jobs []struct {
			Key   []byte    `json:"key"`
			Lease wireLease `json:"lease"`
		} `json:"jobs"`
	}
	waitFor(n.t, "a job", 30*time.Second, func() bool {
		a := n.call("POST", "/v1/claim", map[string]any{"limit": 1, "renderer": renderer})
		return a.code == 200 && json.Unmarshal(a.body, &claimed) == nil && len(claimed.Jobs) == 1
	})
	return claimed.Jobs[0].Key, claimed.Jobs[0].Lease
}

func (n *node) queueView() wire.QueueView {
	n.t.Helper()
	a := n.call("GET", "/v1/queue", nil)
	var q wire.QueueView
	if a.code != 200 || json.Unmarshal(a.body, &q) != nil {
		n.t.Fatalf("GET /v1/queue: %d %s", a.code, a.body)
	}
	return q
}

// A host that asked to be paused (a 429 with Retry-After: 60, from a render it held the lease
// of) stays paused through a batch of 10,000 fenced results naming flood hosts with
// Retry-After: 600: they filled the 1,024-slot host table and evicted it, and the farm went
// back to full concurrency against a site that had said 429. A fenced result now changes no
// host; a result whose key is not a URL is refused by name.
func TestEndToEndFencedResultsLeaveHostsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := filepath.Join(t.TempDir(), "trust-hosts") // the segment is named after it: unique to this test
	os.Mkdir(dir, 0o700)
	seed(t, dir, 4)
	n := startNode(t, dir, 1, "", "") // worker 0 alone: nothing else claims the rows
	waitFor(t, "readiness", 60*time.Second, n.ready)

	key, lease := n.claimOne("farm-eu")
	refusal := wireResultWith(key, lease, 429, "60")
	if a := n.call("POST", "/v1/results", map[string]any{"results": []any{refusal}}); a.code != 200 {
		t.Fatalf("the 429: %d %s", a.code, a.body)
	}
	paused, ok := n.queueHost("shop.test")
	if !ok || !paused.Paused {
		t.Fatalf("shop.test after its 429: %+v %v, want paused", paused, ok)
	}

	flood := make([]any, 10_000)
	for i := range flood {
		k := []byte(fmt.Sprintf("desktop|https://h%d.flood.example/", i))
		flood[i] = wireResultWith(k, wireLease{Slot: lease.Slot, State: lease.State, KeyHash: shm.KeyHash(k)}, 429, "600")
	}
	if a := n.call("POST", "/v1/results", map[string]any{"results": flood}); a.code != http.StatusConflict {
		t.Fatalf("10,000 fenced results: %d %.300s, want 409", a.code, a.body)
	}
	dup := refusal
	dup.Headers = map[string]string{"retry-after": "600"}
	if a := n.call("POST", "/v1/results", map[string]any{"results": []any{dup}}); a.code != http.StatusConflict {
		t.Fatalf("a duplicate of the 429: %d %s, want 409", a.code, a.body)
	}
	q := n.queueView()
	if q.HostEvictions != 0 || q.HostsTracked != 1 {
		t.Fatalf("after the flood: %d hosts tracked, %d evicted; want shop.test alone, none evicted", q.HostsTracked, q.HostEvictions)
	}
	if h, ok := n.queueHost("shop.test"); !ok || !h.Paused || h.PausedUntilMs != paused.PausedUntilMs {
		t.Fatalf("shop.test after the flood: %+v %v, want paused until %d as before", h, ok, paused.PausedUntilMs)
	}

	for _, bad := range []string{"h1.flood.example", "desktop|h1.flood.example", "desktop|ftp://h1.flood.example/"} {
		r := wireResultWith([]byte(bad), wireLease{Slot: lease.Slot, State: lease.State, KeyHash: shm.KeyHash([]byte(bad))}, 429, "600")
		if a := n.call("POST", "/v1/results", map[string]any{"results": []any{r}}); a.code != http.StatusBadRequest || a.field() != "results[0].key" {
			t.Fatalf("key %q: %d %s, want 400 naming results[0].key", bad, a.code, a.body)
		}
	}
}

// wireResultWith is a result of key under lease: a 429 with Retry-After, or a 200 page.
func wireResultWith(key []byte, lease wireLease, status int, retryAfter string) wireHostResult {
	r := wireHostResult{Key: key, Outcome: "server_error", Status: status, Lease: lease}
	if status == 200 {
		r.Outcome, r.Body = "ok", []byte("<html></html>")
	}
	if retryAfter != "" {
		r.Headers = map[string]string{"retry-after": retryAfter}
	}
	return r
}

type wireHostResult struct {
	Key     []byte            `json:"key"`
	Outcome string            `json:"outcome"`
	Status  int               `json:"status,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    []byte            `json:"body,omitempty"`
	Lease   wireLease         `json:"lease"`
}

// A remote renderer claims the one job a host limited to 1 may have in flight; the operator
// deletes the target (or rushes it) meanwhile. The lease is revoked, the remote's result is
// fenced and its release answered "no longer held": the host slot worker 0 held for it must
// be given back with the lease, or the host renders nothing until the slot's lease TTL (10
// minutes). The next claim of the host is granted at once, the clock not moved.
func TestEndToEndRevokedRemoteLeaseGivesBackItsHostSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	for _, revoke := range []string{"delete", "rush"} {
		t.Run(revoke, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "trust-slot-"+revoke) // the segment is named after it: unique to this test
			os.Mkdir(dir, 0o700)
			seed(t, dir, 3)
			n := startNode(t, dir, 1, "render:\n  hosts: {max_concurrency: 1}\n", "") // worker 0 alone: nothing else claims
			waitFor(t, "readiness", 60*time.Second, n.ready)

			key, lease := n.claimOne("farm-eu")
			u := strings.TrimPrefix(string(key), "desktop|")
			if a := n.call("POST", "/v1/claim", map[string]any{"limit": 1, "renderer": "farm-us"}); a.code != 200 || strings.Contains(string(a.body), "shop.test") {
				t.Fatalf("a second claim while shop.test's one slot is held: %d %s, want no job", a.code, a.body)
			}
			switch revoke {
			case "delete":
				if a := n.call("DELETE", "/v1/targets?url="+url.QueryEscape(u), nil); a.code != 200 {
					t.Fatalf("delete: %d %s", a.code, a.body)
				}
			case "rush":
				if a := n.call("POST", "/v1/prioritize", map[string]any{"url": u, "mode": "rush"}); a.code != 200 {
					t.Fatalf("rush: %d %s", a.code, a.body)
				}
			}
			if a := n.call("POST", "/v1/leases/release", map[string]any{"key": key, "lease": lease}); a.code != http.StatusConflict {
				t.Fatalf("release after the %s: %d %s, want 409", revoke, a.code, a.body)
			}
			var claimed struct {
				Jobs []struct {
					URL string `json:"url"`
				} `json:"jobs"`
			}
			a := n.call("POST", "/v1/claim", map[string]any{"limit": 1, "renderer": "farm-us"})
			if a.code != 200 || json.Unmarshal(a.body, &claimed) != nil || len(claimed.Jobs) != 1 {
				t.Fatalf("the next claim of shop.test after the %s: %d %s, want a job at once", revoke, a.code, a.body)
			}
		})
	}
}
