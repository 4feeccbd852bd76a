package shm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks report their figure next to the physical limit measured in the same run: a bare
// atomic add on a word of the mapped segment, alone or with a second process adding to the same
// word. Ratios, not absolute times, are what carry across noisy shared machines.

const benchKeyLen = 60 // real cache keys are about this long

func benchEntries(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		k := fmt.Sprintf("desktop|https://shop.example.test/catalog/item-%08d", i)
		k += strings.Repeat("x", benchKeyLen-len(k))
		es[i] = Entry{Score: float64(n - i), DueAtMs: int64(i), CadenceMs: 3_600_000, Key: []byte(k)}
	}
	return es
}

func benchSegment(b *testing.B, capacity int) (*Segment, string) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "seg")
	seg, err := Create(path, Options{ReadyCapacity: capacity, KeyCapacity: 256, EpochMs: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { seg.Close() })
	return seg, path
}

// bareAddNs measures n atomic adds on the segment's spare counter word.
func bareAddNs(seg *Segment, n int) float64 {
	w, _ := seg.Worker(0)
	p := w.counter(numNamedCounters) // a reserved slot nobody else touches
	start := time.Now()
	for range n {
		atomic.AddUint64(p, 1)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// benchChild runs a child process against the segment until stopped. Modes: "bench-take"
// (takes in a loop) and "bench-add" (adds to the spare counter word in a loop).
type benchChild struct {
	cmd *exec.Cmd
	ctl *control
}

func startBenchChild(b *testing.B, mode, segPath string) *benchChild {
	b.Helper()
	ctlPath := filepath.Join(b.TempDir(), "ctl")
	ctl, err := openControl(ctlPath, true)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "FRESHQ_SHM_SEG="+segPath, "FRESHQ_SHM_CTL="+ctlPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ctl.load(ctlClock) == 0 { // the child sets word 0 once it is spinning
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			b.Fatal("bench child did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return &benchChild{cmd: cmd, ctl: ctl}
}

func (c *benchChild) stop(b *testing.B) {
	c.ctl.store(ctlStop, 1)
	if err := c.cmd.Wait(); err != nil {
		b.Errorf("bench child: %v", err)
	}
	c.ctl.m.Unmap()
}

// runBenchChild is the child side of startBenchChild.
func runBenchChild(mode string) int {
	seg, err := Attach(os.Getenv("FRESHQ_SHM_SEG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctl, err := openControl(os.Getenv("FRESHQ_SHM_CTL"), false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctl.store(ctlClock, 1)
	switch mode {
	case "bench-take":
		var e Entry
		for ctl.load(ctlStop) == 0 {
			for range 64 {
				seg.Ready().Take(&e)
			}
		}
	case "bench-add":
		w, _ := seg.Worker(0)
		p := w.counter(numNamedCounters)
		for ctl.load(ctlStop) == 0 {
			for range 64 {
				atomic.AddUint64(p, 1)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 1
	}
	return 0
}

// BenchmarkTake measures one take from a mapped segment, alone and with a second process taking
// from the same set, each beside the bare atomic add measured the same way.
func BenchmarkTake(b *testing.B) {
	const capacity = DefaultReadyCapacity
	set := benchEntries(capacity)
	for _, contended := range []bool{false, true} {
		name := "uncontended"
		if contended {
			name = "2proc"
		}
		b.Run(name, func(b *testing.B) {
			seg, path := benchSegment(b, capacity)
			r := seg.Ready()
			var bare float64
			if contended {
				c := startBenchChild(b, "bench-add", path)
				bare = bareAddNs(seg, max(b.N, 1_000_000))
				c.stop(b)
			} else {
				bare = bareAddNs(seg, max(b.N, 1_000_000))
			}
			r.Publish(set, 0)
			var child *benchChild
			if contended {
				child = startBenchChild(b, "bench-take", path)
			}
			var e Entry
			b.ResetTimer()
			for range b.N {
				for r.Take(&e) != Taken {
					b.StopTimer()
					r.Publish(set, 0)
					b.StartTimer()
				}
			}
			b.StopTimer()
			if child != nil {
				child.stop(b)
			}
			perTake := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(bare, "bare-add-ns")
			b.ReportMetric(perTake/bare, "x-bare-add")
		})
	}
}

// BenchmarkTakeExhausted measures a take on an exhausted set while a second process does the
// same: it must cost a load, not a contended add.
func BenchmarkTakeExhausted(b *testing.B) {
	seg, path := benchSegment(b, 16)
	c := startBenchChild(b, "bench-add", path)
	bare := bareAddNs(seg, max(b.N, 1_000_000))
	c.stop(b)
	seg.Ready().Publish(nil, 0) // an empty generation: every take is exhausted
	child := startBenchChild(b, "bench-take", path)
	var e Entry
	b.ResetTimer()
	for range b.N {
		if seg.Ready().Take(&e) != Exhausted {
			b.Fatal("take on an empty set did not report exhausted")
		}
	}
	b.StopTimer()
	child.stop(b)
	b.ReportMetric(bare, "contended-add-ns")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/bare, "x-contended-add")
}

// BenchmarkLeaseAcquireRelease measures one acquire plus one release on a default-sized table.
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	seg, _ := benchSegment(b, 16)
	l := seg.Leases()
	hashes := make([]uint64, 1024)
	for i := range hashes {
		hashes[i] = KeyHash([]byte(fmt.Sprintf("desktop|https://example.test/p/%d", i)))
	}
	b.ResetTimer()
	for i := range b.N {
		lease, st := l.Acquire(hashes[i&1023], 1000, 600_000, 1)
		if st != Acquired {
			b.Fatalf("acquire: %v", st)
		}
		l.Release(lease, 1000, 0)
	}
}

// BenchmarkPublish5000 measures publishing a full default-sized set of 60-byte keys.
func BenchmarkPublish5000(b *testing.B) {
	seg, _ := benchSegment(b, DefaultReadyCapacity)
	set := benchEntries(DefaultReadyCapacity)
	b.ResetTimer()
	for range b.N {
		seg.Ready().Publish(set, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/publish")
}
