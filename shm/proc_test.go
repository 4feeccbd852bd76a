package shm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
//	word 2..      one occupancy word per lease key: a holder adds 1 after acquiring and must see 1
const (
	childEnv     = "FRESHQ_SHM_CHILD"
	ctlWords     = 512
	ctlClock     = 0
	ctlStop      = 1
	ctlOccupancy = 2
	leaseKeys    = 64
	heldKeyBase  = 1 << 40 // keys the lease-holding child takes, disjoint from the takers' keys
	heldKeys     = 10
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
func (c *control) add(i int, d int64) uint64 {
	return atomic.AddUint64(&c.words[i], uint64(d))
}

// runChild is a child process's whole life. It reports on stdout:
//
//	t GEN INDEX     an entry it took and verified
//	held            (holder mode) it holds its leases and is ready to be killed
//	err TEXT        a violation; the child then exits 1
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
	defer out.Flush()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(out, "err "+format+"\n", args...)
		return 1
	}
	leases := seg.Leases()
	if mode == "holder" {
		now := int64(ctl.load(ctlClock))
		for k := range uint64(heldKeys) {
			if _, st := leases.Acquire(heldKeyBase+k, now, 10_000, uint64(id)); st != Acquired {
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
		// Lease the entry's key and prove nobody else holds it meanwhile.
		k := uint64(e.Index % leaseKeys)
		lease, st := leases.Acquire(k+1, int64(ctl.load(ctlClock)), 10_000, uint64(id))
		if st != Acquired {
			continue
		}
		if n := ctl.add(ctlOccupancy+int(k), 1); n != 1 {
			return fail("lease key %d held by %d processes at once", k, n)
		}
		ctl.add(ctlOccupancy+int(k), -1)
		if !leases.Release(lease, int64(ctl.load(ctlClock)), 0) {
			return fail("release of a held lease on key %d failed", k)
		}
	}
	return 0
}

type child struct {
	cmd    *exec.Cmd
	mode   string
	lines  chan string
	done   chan struct{}
	output []string
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
	c := &child{cmd: cmd, mode: mode, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "t ") {
				c.lines <- line
			}
			c.output = append(c.output, line)
		}
		io.Copy(io.Discard, stdout)
	}()
	return c
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

	holder := startChild(t, "holder", 0, segPath, ctlPath)
	if line := <-holder.lines; line != "held" {
		t.Fatalf("holder child: %q", line)
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
			holder.cmd.Wait()
			now := int64(ctl.load(ctlClock))
			for k := range uint64(heldKeys) {
				if _, st := seg.Leases().Acquire(heldKeyBase+k, now, 10_000, 99); st != Held {
					t.Fatalf("killed child's lease %d: %v before its expiry, want held", k, st)
				}
			}
			ctl.store(ctlClock, uint64(now+10_000)) // the killed holder's leases lapse
			for k := range uint64(heldKeys) {
				lease, st := seg.Leases().Acquire(heldKeyBase+k, now+10_000, 10_000, 99)
				if st != Acquired {
					t.Fatalf("killed child's lease %d after its TTL: %v, want acquired", k, st)
				}
				seg.Leases().Release(lease, now+10_000, 0)
			}
		}
	}
	ctl.store(ctlStop, 1)

	seen := map[[2]uint64]int{}
	var mu sync.Mutex
	for i, c := range children {
		if c != holder {
			if err := c.cmd.Wait(); err != nil {
				t.Errorf("child %d: %v; output: %q", i, err, lastLines(c.output))
			}
		}
		<-c.done
		mu.Lock()
		lines := c.output
		if c == holder && len(lines) > 0 {
			lines = lines[:len(lines)-1] // SIGKILL may cut the last line mid-write
		}
		for _, line := range lines {
			switch {
			case strings.HasPrefix(line, "t "):
				var g, idx uint64
				if _, err := fmt.Sscanf(line, "t %d %d", &g, &idx); err != nil {
					t.Fatalf("child %d: bad line %q", i, line)
				}
				if idx >= published[g] {
					t.Fatalf("child %d took index %d of generation %d, which had %d entries", i, idx, g, published[g])
				}
				if prev, dup := seen[[2]uint64{g, idx}]; dup {
					t.Fatalf("R1: generation %d index %d taken by child %d and child %d", g, idx, prev, i)
				}
				seen[[2]uint64{g, idx}] = i
			case strings.HasPrefix(line, "err "):
				t.Errorf("child %d: %s", i, line)
			}
		}
		mu.Unlock()
	}
	checkCursor()
	perChild := map[int]int{}
	for _, c := range seen {
		perChild[c]++
	}
	for i := 1; i <= takers; i++ {
		if perChild[i] == 0 {
			t.Errorf("taker %d took nothing", i)
		}
	}
	t.Logf("%d entries taken across %d processes over %d generations; per child %v", len(seen), len(children), gens, perChild)
	if s := seg.Leases().Stats(int64(ctl.load(ctlClock))); s.Live != 0 {
		t.Errorf("%d leases still live after every child released or lapsed", s.Live)
	}
}

func lastLines(lines []string) []string {
	return lines[max(0, len(lines)-5):]
}
