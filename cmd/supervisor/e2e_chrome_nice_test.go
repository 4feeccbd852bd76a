package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procNiceness is field 19 of /proc/<pid>/stat, counted from the closing paren of the process's
// name (which may hold spaces); an error wrapping fs.ErrNotExist for a process that is gone.
func procNiceness(pid int) (int, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])) // f[0] is field 3
	if len(f) < 17 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	return strconv.Atoi(f[16])
}

// On a real node, the render worker's browsers — every process of their process groups — run
// at render.chrome.nice (absent: 10) added to the node's niceness, while worker 0 (the crawler
// listener, the store) and the render worker itself keep the node's; render.chrome.nice: 0
// keeps the browsers there too.
func TestEndToEndChromeBrowsersRunNiced(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	needChromium(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><html><body><p>rendered</p><script>document.body.append("by script")</script></body></html>`)
	}))
	defer origin.Close()
	self, err := procNiceness(os.Getpid()) // the supervisor and its workers inherit it
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, chrome string
		want         int
	}{
		{"absent", "{idle: 200ms}", min(self+10, 19)},
		{"zero", "{idle: 200ms, nice: 0}", self},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "chrome-nice-"+tc.name) // the segment is named after it
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			n := startNode(t, dir, 2, `queue: {ready: {sweep_interval: 1s}}
render:
  renderer: chrome
  concurrency: 2
  timeout: 20s
  domains: ["127.0.0.1"]
  chrome: `+tc.chrome+"\n", "")
			waitFor(t, "ready", 60*time.Second, n.ready)
			page := origin.URL + "/c/niced"
			var up map[string]any
			if code := n.post("/v1/targets", []map[string]string{{"url": page}}, &up); code != http.StatusOK {
				t.Fatalf("POST /v1/targets: %d %v", code, up)
			}
			waitFor(t, "the page rendered and served", 60*time.Second, func() bool {
				resp, err := http.Get("http://" + n.addr + "/v1/pages?url=" + url.QueryEscape(page))
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
			seg := n.segment()
			worker0, render := workerPID(seg, 0), workerPID(seg, 1)
			for _, w := range []struct {
				what string
				pid  int
			}{{"worker 0", worker0}, {"the render worker", render}} {
				if got, err := procNiceness(w.pid); err != nil || got != self {
					t.Errorf("%s (pid %d) runs at niceness %d (%v), want the node's %d", w.what, w.pid, got, err, self)
				}
			}
			groups := browserGroups(render)
			if len(groups) == 0 {
				t.Fatalf("no browser under render worker %d: %v", render, chromeProcs())
			}
			seen := 0
			for pid, pp := range chromeProcs() {
				if !groups[pp[1]] {
					continue
				}
				got, err := procNiceness(pid)
				if errors.Is(err, fs.ErrNotExist) {
					continue // a helper that ended since it was listed
				}
				seen++
				if err != nil || got != tc.want {
					t.Errorf("browser process %d (group %d) runs at niceness %d (%v), want %d", pid, pp[1], got, err, tc.want)
				}
			}
			if seen < 3 {
				t.Errorf("%d processes in the browsers' groups %v: want the browser and the helpers it forked", seen, groups)
			}
		})
	}
}
