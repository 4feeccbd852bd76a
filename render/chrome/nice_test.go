package chrome

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/testkit/testdns"
)

// procStat is what /proc/<pid>/stat says of a process: its name, process group (field 5) and
// niceness (field 19). The name may hold spaces, so fields are counted from its closing paren.
type procStat struct {
	comm       string
	pgrp, nice int
}

func readProcStat(pid int) (procStat, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	lp, rp := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[rp+1:])) // f[0] is field 3 (state)
	if lp < 0 || len(f) < 17 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	pgrp, err1 := strconv.Atoi(f[2])
	nice, err2 := strconv.Atoi(f[16])
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	return procStat{comm: string(stat[lp+1 : rp]), pgrp: pgrp, nice: nice}, nil
}

// The browser and every process of its process group — the zygote, the renderers, the
// utilities it forked to render a page — run at render.chrome.nice added to the worker's
// niceness, from their start (they start under nice, which execs Chromium); with 0, at the
// worker's own. A worker whose PATH has no nice program still renders, at its own priority.
func TestBrowserProcessesRunAtRenderChromeNice(t *testing.T) {
	self, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		nice, want int
		noNice     bool
	}{
		{"nice=10", 10, min(self.nice+10, 19), false},
		{"nice=0", 0, self.nice, false},
		{"nice=10 without a nice program", 10, self.nice, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			s.page("/p", `<!doctype html><html><body><p id=x>rendered</p><script>document.body.append("by script")</script></body></html>`)
			cfg := testCfg()
			cfg.Nice, cfg.Path = tc.nice, needChromium(t)
			testdns.Use(t, map[string][]netip.Addr{"site.test": {netip.MustParseAddr("127.0.0.1")}})
			if tc.noNice {
				t.Setenv("PATH", t.TempDir()) // the browser is named by its path; its own PATH is set apart
			}
			r, err := New(cfg, Hooks{})
			if err != nil {
				t.Fatalf("the renderer did not start: %v", err)
			}
			t.Cleanup(func() { r.Close() })
			res := render1(t, r, render.Request{URL: s.url("/p")})
			if res.Outcome != outcome.OK || !strings.Contains(string(res.Body), "by script") {
				t.Fatalf("render: %v %s: %s", res.Outcome, res.Err, res.Body)
			}
			r.mu.Lock()
			pgid := r.cur.pgid
			r.mu.Unlock()
			group := map[int]procStat{}
			forEachProc(func(pid int) {
				if st, err := readProcStat(pid); err == nil && st.pgrp == pgid {
					group[pid] = st
				}
			})
			if _, ok := group[pgid]; !ok || len(group) < 3 {
				t.Fatalf("browser pid %d: its process group holds %v, want the browser and the helpers it forked", pgid, group)
			}
			for pid, st := range group {
				if st.nice != tc.want {
					t.Errorf("pid %d (%s) of the browser's process group runs at niceness %d, want %d (the worker's %d)", pid, st.comm, st.nice, tc.want, self.nice)
				}
			}
			t.Logf("worker at niceness %d; browser's process group: %v", self.nice, group)
		})
	}
}
