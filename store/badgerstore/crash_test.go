package badgerstore

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
)

const crashChildEnv = "FRESHQ_STORE_CRASH_CHILD"

// The crash child writes through the funnel from several goroutines and prints one line per
// acknowledged write, after the acknowledgement, until it is killed:
//
//	ack <key> <due> <page>
//
// Writer g owns keys g, g+crashWriters, …; each of its writes moves one key to a due time
// larger than any before it, so the latest acknowledged due time of a key is a lower bound of
// what must be on disk. Every third write carries a target and a 2 KiB page (value log).
const (
	crashWriters = 4
	crashKeys    = 64
)

func crashKey(i int) string { return fmt.Sprintf("mobile|https://crash.example/k/%03d", i) }

func crashChild(dir string) {
	st, err := Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	body := []byte(strings.Repeat("<div>crash</div>", 128))
	var wg sync.WaitGroup
	for g := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; ; seq++ {
				k := crashKey(g + crashWriters*(seq%(crashKeys/crashWriters)))
				due := int64(seq)*crashWriters + int64(g)
				s, _ := store.NewSchedule([]byte(k), due, seq%2 == 0, int64(seq), store.Lanes{})
				w := store.Write{Schedule: s}
				page := seq%3 == 0
				if page {
					tg := store.Target{URL: k, Source: store.SourceAPI, StoredIntervalMs: due}
					w.Target, w.Page = &tg, &store.Page{Status: 200, Body: body, RenderedAtMs: due}
				}
				if err := st.WriteSchedules([]store.Write{w}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %s %d %v\n", k, due, page)
				out.Flush() // the parent must see every ack before the kill
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestCrashSafety kills a writing child with SIGKILL mid-stream, reopens its directory, and
// checks that every acknowledged write is there (at its due time or a later one of the same
// key) and that no schedule row lacks its index entry or the reverse.
func TestCrashSafety(t *testing.T) {
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	dir := t.TempDir()
	for round := range rounds {
		// Each child restarts its due times, so the bounds are per round.
		acked := map[string]int64{}  // key → latest acknowledged due
		pageAt := map[string]int64{} // key → latest acknowledged page's RenderedAtMs
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a number of acks that varies per round, so the kill lands at different
		// points of the committer's cycle.
		killAfter := 1500 + 700*round
		sc := bufio.NewScanner(stdout)
		n := 0
		deadline := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 || f[0] != "ack" {
				continue
			}
			due, _ := strconv.ParseInt(f[2], 10, 64)
			acked[f[1]] = max(acked[f[1]], due)
			if f[3] == "true" {
				pageAt[f[1]] = max(pageAt[f[1]], due)
			}
			n++
			if n == killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		deadline.Stop()
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die of SIGKILL after %d acks: %v", round, n, err)
		}

		st, err := Open(dir, nil)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		for k, want := range acked {
			r, err := st.GetSchedule([]byte(k))
			if err != nil || r.DueAtMs < want {
				t.Fatalf("round %d: acknowledged %s@%d, found %+v %v", round, k, want, r, err)
			}
			if p, ok := pageAt[k]; ok {
				pg, err := st.GetPage([]byte(k))
				if err != nil || pg.RenderedAtMs < p {
					t.Fatalf("round %d: acknowledged page of %s@%d, found %v", round, k, p, err)
				}
			}
		}
		rep := mustVerify(t, st)
		t.Logf("round %d: killed after %d acks; %d rows, %d index entries, all consistent", round, n, rep.Rows, rep.Entries)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
