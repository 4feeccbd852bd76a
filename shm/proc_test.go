package shm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"
)

// The cross-process tests run the test binary again as child processes (TestMain dispatches on
// childEnv). Parent and children share the segment under test and a small control file:
//
//	word 0        virtual clock, ms (the parent advances it; nobody sleeps to pass time)
//	word 1        stop flag: children flush and exit when it is 1
//	word 2..      one occupancy word per lease key: 0, or the occupant's child id + 1, which a
//	              child swaps in after acquiring the key's lease and out before releasing it
const (
	childEnv     = "FRESHQ_SHM_CHILD"
	ctlWords     = 512
	ctlClock     = 0
	ctlStop      = 1
	ctlOccupancy = 2
	leaseKeys    = 64
	heldKeyBase  = 1 << 40 // keys the lease-holding child takes, disjoint from the takers' keys
	heldKeys     = 10
	holderID     = 0 // the lease-holding child's id; takers are 1, 2, …
	// The parent moves the clock once, by heldTTL, after killing the holder: the holder's leases
	// (its held keys and any entry's key it was killed holding) must lapse then, and nobody
	// else's. A taker's lease lives for takerTTL, far longer than that move, so a taker still
	// holding one across it releases it as the holder it still is.
	heldTTL  = 10_000    // ms
	takerTTL = 1_000_000 // ms
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if strings.HasPrefix(mode, "bench-") {
			os.Exit(runBenchChild(mode))
		}
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

type control struct {
	m     mmap.MMap
	words []uint64
}

func openControl(path string, create bool) (*control, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if create {
		if err := f.Truncate(8 * ctlWords); err != nil {
			return nil, err
		}
	}
	m, err := mmap.Map(f, mmap.RDWR, 0)
	if err != nil {
		return nil, err
	}
	return &control{m: m, words: unsafe.Slice((*uint64)(unsafe.Pointer(&m[0])), ctlWords)}, nil
}

func (c *control) load(i int) uint64     { return atomic.LoadUint64(&c.words[i]) }
func (c *control) store(i int, v uint64) { atomic.StoreUint64(&c.words[i], v) }
func (c *control) cas(i int, old, new uint64) bool {
	return atomic.CompareAndSwapUint64(&c.words[i], old, new)
}

// runChild is a child process's whole life. It reports on stdout, one line each:
//
//	held            (holder mode, its first line) it holds its leases and is ready to be killed
//	t GEN INDEX     an entry it took and verified
//	err TEXT        a violation; the child then exits 1
//	end N           its last line, however it returns: it wrote N t lines before it
//
// The end line lets the parent tell output that arrived whole from output cut short on the way
// (parseChildOutput); only a killed child has none.
func runChild(mode string) int {
	seg, err := Attach(os.Getenv("FRESHQ_SHM_SEG"))
	if err != nil {
		fmt.Printf("err attach: %v\n", err)
		return 1
	}
	ctl, err := openControl(os.Getenv("FRESHQ_SHM_CTL"), false)
	if err != nil {
		fmt.Printf("err control: %v\n", err)
		return 1
	}
	id, _ := strconv.Atoi(os.Getenv("FRESHQ_SHM_ID"))
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	takes := 0
	defer func() {
		fmt.Fprintf(out, "end %d\n", takes)
		out.Flush()
	}()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(out, "err "+format+"\n", args...)
		return 1
	}
	leases := seg.Leases()
	ttl := int64(takerTTL)
	if mode == "holder" {
		ttl = heldTTL
		now := int64(ctl.load(ctlClock))
		for k := range uint64(heldKeys) {
			if _, st := leases.Acquire(heldKeyBase+k, now, heldTTL, uint64(id)); st != Acquired {
				return fail("holder acquire %d: %v", k, st)
			}
		}
		fmt.Fprintln(out, "held")
		out.Flush()
	}
	var e Entry
	for ctl.load(ctlStop) == 0 {
		if seg.Ready().Take(&e) != Taken {
			continue
		}
		if err := verifyEntry(&e); err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(out, "t %d %d\n", e.Gen, e.Index)
		takes++
		if mode == "holder" {
			// It is killed at an arbitrary instant: each take goes out at once, so every take
			// but the one in flight reaches the R1 check instead of dying in the buffer.
			out.Flush()
		}
		// Lease the entry's key and prove nobody else holds it meanwhile.
		k := uint64(e.Index % leaseKeys)
		acquiredAt := int64(ctl.load(ctlClock))
		lease, st := leases.Acquire(k+1, acquiredAt, ttl, uint64(id))
		if st != Acquired {
			continue
		}
		me := uint64(id) + 1
		if !ctl.cas(ctlOccupancy+int(k), 0, me) {
			return fail("lease key %d held by two processes at once: child %d acquired it over mark %d", k, id, ctl.load(ctlOccupancy+int(k)))
		}
		if !ctl.cas(ctlOccupancy+int(k), me, 0) {
			return fail("lease key %d held by two processes at once: child %d's mark replaced by %d", k, id, ctl.load(ctlOccupancy+int(k)))
		}
		if releasedAt := int64(ctl.load(ctlClock)); !leases.Release(lease, releasedAt, 0) {
			return fail("release of a held lease on key %d failed (acquired at %d for %d ms, released at %d)",
				k, acquiredAt, ttl, releasedAt)
		}
	}
	return 0
}

type child struct {
	cmd     *exec.Cmd
	mode    string
	first   chan string   // the first line the child wrote (or all it wrote, if it wrote no newline)
	done    chan struct{} // closed once stdout reached EOF: raw and readErr are final
	raw     []byte        // everything the child wrote to stdout
	readErr error
}

func startChild(t *testing.T, mode string, id int, segPath, ctlPath string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "FRESHQ_SHM_SEG="+segPath,
		"FRESHQ_SHM_CTL="+ctlPath, "FRESHQ_SHM_ID="+strconv.Itoa(id))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, mode: mode, first: make(chan string, 1), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		br := bufio.NewReader(stdout)
		first, err := br.ReadString('\n')
		c.first <- first
		c.raw = []byte(first)
		if err == nil {
			var rest []byte
			rest, err = io.ReadAll(br)
			c.raw = append(c.raw, rest...)
		} else if err == io.EOF {
			err = nil
		}
		c.readErr = err
	}()
	return c
}

// exit waits until the child's stdout has been read to EOF, then reaps the child. The order is
// the point: Wait closes the pipe as soon as the process has exited, so a Wait before EOF loses
// whatever the reader had not drained yet and cuts the line it was reading where the close fell.
func (c *child) exit(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second): // turns a hang into a failure; nothing is timed
		t.Fatalf("%s child: stdout still open 30 s after it was told to stop", c.mode)
	}
	return c.cmd.Wait()
}

// errHarness marks a child's output that did not arrive whole: a fault of the test's plumbing,
// which says nothing about shm either way.
var errHarness = errors.New("harness: child output incomplete")

// childReport is what one child reported, from output that arrived whole.
type childReport struct {
	takes [][2]uint64 // (generation, index) of each take, in order
	errs  []string    // its err lines: violations the child saw itself
	cut   string      // a killed child's last line, cut by the kill and dropped
}

// parseChildOutput reads everything a child wrote to stdout, strictly. A child that exited
// (killed false) ends every line with a newline and its output with "end N", N its number of t
// lines; a missing newline, a missing or wrong end line, or a line that is not exactly one of the
// forms runChild writes means output was lost or cut on the way, and is errHarness. No line of
// such output may be believed: a cut "t 1028 61" reads as "t 1028 6", which another child may
// really have taken, and would pass for an R1 violation. A killed child may stop anywhere, so
// its unterminated last line is dropped (into cut); every complete line still counts.
func parseChildOutput(raw string, killed bool) (childReport, error) {
	var r childReport
	lines := strings.Split(raw, "\n")
	if last := lines[len(lines)-1]; last != "" { // no newline at the end: the last line is cut
		if !killed {
			return r, fmt.Errorf("%w: it ends mid-line in %q", errHarness, last)
		}
		r.cut = last
	}
	lines = lines[:len(lines)-1]
	ended := false
	for i, line := range lines {
		if ended {
			return r, fmt.Errorf("%w: line %d %q after its end line", errHarness, i, line)
		}
		f := strings.Fields(line)
		switch {
		case line == "held" && i == 0:
		case strings.HasPrefix(line, "err "):
			r.errs = append(r.errs, line)
		case len(f) == 3 && f[0] == "t" && line == strings.Join(f, " "):
			g, gerr := strconv.ParseUint(f[1], 10, 64)
			idx, ierr := strconv.ParseUint(f[2], 10, 32)
			if gerr != nil || ierr != nil {
				return r, fmt.Errorf("%w: malformed line %d %q", errHarness, i, line)
			}
			r.takes = append(r.takes, [2]uint64{g, idx})
		case len(f) == 2 && f[0] == "end" && line == strings.Join(f, " "):
			n, err := strconv.Atoi(f[1])
			if err != nil || n != len(r.takes) {
				return r, fmt.Errorf("%w: %q, but %d t lines arrived", errHarness, line, len(r.takes))
			}
			ended = true
		default:
			return r, fmt.Errorf("%w: malformed line %d %q", errHarness, i, line)
		}
	}
	if !ended && !killed {
		return r, fmt.Errorf("%w: no end line after %d lines", errHarness, len(lines))
	}
	return r, nil
}

// checkTakes holds the takes of every child to R1 (no (generation, index) taken twice, by the
// same child or two) and to the generation's size. It returns how many takes each child made.
func checkTakes(reports []childReport, published map[uint64]uint64) (map[int]int, error) {
	seen := map[[2]uint64]int{}
	perChild := map[int]int{}
	for i, r := range reports {
		for _, tk := range r.takes {
			g, idx := tk[0], tk[1]
			if idx >= published[g] {
				return nil, fmt.Errorf("child %d took index %d of generation %d, which had %d entries", i, idx, g, published[g])
			}
			if prev, dup := seen[tk]; dup {
				return nil, fmt.Errorf("R1: generation %d index %d taken by child %d and child %d", g, idx, prev, i)
			}
			seen[tk] = i
			perChild[i]++
		}
	}
	return perChild, nil
}

// waitFor polls cond until it holds. The deadline only turns a hang into a failure; no
// assertion depends on how long anything takes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func TestMultiProcessReadyAndLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const (
		takers   = 3 // plus one holder that also takes, and is killed half-way: 4 children
		gens     = 1200
		capacity = 256
		keyCap   = 96
	)
	dir := t.TempDir()
	segPath, ctlPath := filepath.Join(dir, "seg"), filepath.Join(dir, "ctl")
	seg, err := Create(segPath, Options{ReadyCapacity: capacity, KeyCapacity: keyCap,
		LeaseCapacity: 512, LeaseWindow: 16, Workers: 1, EpochMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	ctl, err := openControl(ctlPath, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.m.Unmap()
	ctl.store(ctlClock, 2000)

	holder := startChild(t, "holder", holderID, segPath, ctlPath)
	select {
	case line := <-holder.first:
		if line != "held\n" {
			t.Fatalf("holder child: %q", line)
		}
	case <-time.After(30 * time.Second): // turns a hang into a failure; nothing is timed
		t.Fatal("holder child: no output 30 s after its start")
	}
	children := []*child{holder}
	for i := 1; i <= takers; i++ {
		children = append(children, startChild(t, "take", i, segPath, ctlPath))
	}
	defer func() {
		for _, c := range children {
			c.cmd.Process.Kill()
		}
	}()

	r := seg.Ready()
	maxOvershoot := uint64(len(children))
	checkCursor := func() {
		for i := range r.slots {
			s := &r.slots[i]
			w, n := atomic.LoadUint64(s.cursor), atomic.LoadUint64(s.count)
			if cursorIndex(w) > n+maxOvershoot {
				t.Fatalf("R3: slot %d cursor index %d, count %d, %d takers", i, cursorIndex(w), n, maxOvershoot)
			}
		}
	}
	published := map[uint64]uint64{}
	for g := uint64(1); g <= gens; g++ {
		n := int(g*37%capacity) + 1
		if g%10 == 0 {
			n = 0 // an empty generation now and then
		}
		res := r.Publish(checkedSet(g, n, keyCap), int64(g))
		if res.Gen != g || res.Published != n {
			t.Fatalf("publish %d: %+v", g, res)
		}
		published[g] = uint64(n)
		checkCursor()
		if g%2 == 0 {
			// Let this generation drain before the next, so takers meet exhaustion and clamps;
			// odd generations are replaced while takes are in flight.
			waitFor(t, fmt.Sprintf("generation %d to drain", g), func() bool {
				checkCursor()
				return r.Stats().Taken >= uint64(n)
			})
		}
		if g == gens/2 {
			// R4: kill the holder mid-take. Nobody may notice but the lease table.
			if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			holder.exit(t) // "signal: killed"; what it wrote is checked with the rest
			now := int64(ctl.load(ctlClock))
			for k := range uint64(heldKeys) {
				if _, st := seg.Leases().Acquire(heldKeyBase+k, now, heldTTL, 99); st != Held {
					t.Fatalf("killed child's lease %d: %v before its expiry, want held", k, st)
				}
			}
			// If the kill fell between the holder's two swaps, its mark is still on a key whose
			// lease it holds until the clock moves, so no taker can be there: clear it before.
			for k := range leaseKeys {
				if ctl.cas(ctlOccupancy+k, holderID+1, 0) {
					t.Logf("the holder was killed on lease key %d", k)
				}
			}
			// The killed holder's leases lapse; the takers' (takerTTL) do not.
			ctl.store(ctlClock, uint64(now+heldTTL))
			for k := range uint64(heldKeys) {
				lease, st := seg.Leases().Acquire(heldKeyBase+k, now+heldTTL, heldTTL, 99)
				if st != Acquired {
					t.Fatalf("killed child's lease %d after its TTL: %v, want acquired", k, st)
				}
				seg.Leases().Release(lease, now+heldTTL, 0)
			}
		}
	}
	ctl.store(ctlStop, 1)

	// Every child's output is read whole before any of it is believed (parseChildOutput).
	reports := make([]childReport, len(children))
	for i, c := range children {
		var waitErr error
		if c != holder {
			waitErr = c.exit(t)
		}
		if c.readErr != nil {
			t.Fatalf("child %d: %v: reading its stdout: %v", i, errHarness, c.readErr)
		}
		r, err := parseChildOutput(string(c.raw), c == holder)
		if err != nil {
			t.Fatalf("child %d: %v; its output ends %q", i, err, tail(c.raw))
		}
		for _, line := range r.errs {
			t.Errorf("child %d: %s", i, line)
		}
		if waitErr != nil {
			t.Errorf("child %d: %v; its output ends %q", i, waitErr, tail(c.raw))
		}
		if r.cut != "" {
			t.Logf("child %d: its line %q was cut by the kill and is not checked", i, r.cut)
		}
		reports[i] = r
	}
	perChild, err := checkTakes(reports, published)
	if err != nil {
		t.Fatal(err)
	}
	checkCursor()
	seen := 0
	for _, n := range perChild {
		seen += n
	}
	for i := 1; i <= takers; i++ {
		if perChild[i] == 0 {
			t.Errorf("taker %d took nothing", i)
		}
	}
	t.Logf("%d entries taken across %d processes over %d generations; per child %v", seen, len(children), gens, perChild)
	if s := seg.Leases().Stats(int64(ctl.load(ctlClock))); s.Live != 0 {
		t.Errorf("%d leases still live after every child released or lapsed", s.Live)
	}
}

// tail is the end of a child's output, for a failure message.
func tail(raw []byte) string {
	return string(raw[max(0, len(raw)-120):])
}

// The multi-process test's output checks: output that did not arrive whole is a harness error
// and never reaches the R1 check, while whole output holding a take twice is still R1. The cut
// outputs are the shapes a Wait that closed the pipe before it was drained produced.
func TestChildOutputCheckedWholeBeforeR1(t *testing.T) {
	published := map[uint64]uint64{1: 8, 1028: 149}
	harness := []struct {
		name, raw string
		killed    bool
	}{
		{"cut mid-line, reads as another take", "t 1028 118\nt 1028 119\nt 1028 12", false},
		{"cut mid-line, unparseable", "t 976 87\nt 976 ", false},
		{"cut at a line end, the rest lost", "t 1028 118\nt 1028 119\nt 1028 12\n", false},
		{"nothing arrived", "", false},
		{"end line disagrees", "t 1 2\nend 2\n", false},
		{"line after the end", "t 1 2\nend 1\nt 1 3\n", false},
		{"trailing field", "t 1 2 3\nend 1\n", false},
		{"missing field", "t 976 \nend 1\n", false},
		{"not a number", "t 1 x\nend 1\n", false},
		{"held but not first", "t 1 2\nheld\nend 1\n", false},
		{"killed, end line disagrees", "held\nt 1 2\nend 2\n", true},
	}
	for _, tc := range harness {
		r, err := parseChildOutput(tc.raw, tc.killed)
		if !errors.Is(err, errHarness) {
			t.Errorf("%s: %q parsed as %+v, %v; want a harness error", tc.name, tc.raw, r, err)
		}
	}

	r, err := parseChildOutput("t 1 2\nerr release of a held lease on key 2 failed\nend 1\n", false)
	if err != nil || len(r.takes) != 1 || len(r.errs) != 1 {
		t.Errorf("whole output with an err line: %+v, %v", r, err)
	}
	r, err = parseChildOutput("held\nt 1 2\nt 1", true)
	if err != nil || len(r.takes) != 1 || r.cut != "t 1" {
		t.Errorf("killed child cut mid-line: %+v, %v; want its whole lines kept and the cut one dropped", r, err)
	}
	r, err = parseChildOutput("held\nt 1 2\nt 1 3\n", true)
	if err != nil || len(r.takes) != 2 {
		t.Errorf("killed child between lines: %+v, %v; want every line kept", r, err)
	}

	// R1 is as strict as ever on whole output: a take twice, by two children or by one.
	a, _ := parseChildOutput("t 1028 12\nend 1\n", false)
	b, _ := parseChildOutput("t 1028 61\nt 1028 12\nend 2\n", false)
	if _, err := checkTakes([]childReport{a, b}, published); err == nil || !strings.HasPrefix(err.Error(), "R1:") {
		t.Errorf("two children taking (1028, 12): %v, want an R1 violation", err)
	}
	c, _ := parseChildOutput("t 1 2\nt 1 2\nend 2\n", false)
	if _, err := checkTakes([]childReport{c}, published); err == nil || !strings.HasPrefix(err.Error(), "R1:") {
		t.Errorf("one child taking (1, 2) twice: %v, want an R1 violation", err)
	}
	d, _ := parseChildOutput("t 1 8\nend 1\n", false)
	if _, err := checkTakes([]childReport{d}, published); err == nil {
		t.Error("index 8 of a generation of 8 entries passed")
	}
	per, err := checkTakes([]childReport{a, {takes: [][2]uint64{{1028, 61}, {1, 0}}}}, published)
	if err != nil || per[0] != 1 || per[1] != 2 {
		t.Errorf("distinct takes: %v, %v", per, err)
	}
}
