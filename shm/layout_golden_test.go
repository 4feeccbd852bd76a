package shm

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/cockroachdb/datadriven"

	"github.com/freshq/freshq/shm/hosttable"
)

// The segment's layout is pinned twice: testdata/layout.txt records the header's field offsets
// and the geometry the code computes for a few Options (TestLayoutGolden; regenerate with
// -rewrite after a deliberate change, and bump LayoutVersion), and docs/shm-format.md is read
// back against the bytes the code writes (TestFormatDocMatchesCode), so the document cannot
// drift from the code silently.

// headerFields are the header's named offsets in order; each field runs to the next one's.
var headerFields = []struct {
	name string
	off  int
}{
	{"magic", hMagic}, {"version", hVersion}, {"headerSize", hHeaderSize}, {"segmentSize", hSegmentSize},
	{"creatorPID", hCreatorPID}, {"epochMs", hEpochMs}, {"readyCapacity", hReadyCapacity},
	{"keyCapacity", hKeyCapacity}, {"entrySize", hEntrySize}, {"leaseCapacity", hLeaseCapacity},
	{"leaseWindow", hLeaseWindow}, {"workers", hWorkerCapacity}, {"counters", hCounters},
	{"hostCapacity", hHostCapacity}, {"ready", hSections}, {"lease", hSections + 16}, {"floor", hSections + 32},
	{"workers", hSections + 48}, {"hosts", hSections + 64}, {"checksum", hChecksum}, {"zero", hEnd},
}

func headerFieldSize(i int) int {
	if i+1 < len(headerFields) {
		return headerFields[i+1].off - headerFields[i].off
	}
	return headerSize - headerFields[i].off
}

// TestLayoutGolden replays testdata/layout.txt.
//
//	header                     the header's fields: offset, size, name
//	layout [ready=N] [key=N] [leases=N] [window=N] [workers=N]
//	                           the geometry of a segment with these Options (0 = default)
func TestLayoutGolden(t *testing.T) {
	datadriven.RunTest(t, "testdata/layout.txt", func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "header":
			var b strings.Builder
			w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "offset\tsize\t field")
			for i, f := range headerFields {
				fmt.Fprintf(w, "%d\t%d\t %s\n", f.off, headerFieldSize(i), f.name)
			}
			w.Flush()
			return b.String()
		case "layout":
			var o Options
			d.MaybeScanArgs(t, "ready", &o.ReadyCapacity)
			d.MaybeScanArgs(t, "key", &o.KeyCapacity)
			d.MaybeScanArgs(t, "leases", &o.LeaseCapacity)
			d.MaybeScanArgs(t, "window", &o.LeaseWindow)
			d.MaybeScanArgs(t, "workers", &o.Workers)
			o = o.EnsureDefaults()
			if err := o.Validate(); err != nil {
				d.Fatalf(t, "%v", err)
			}
			return describeLayout(newLayout(o, 0))
		}
		d.Fatalf(t, "unknown directive %q", d.Cmd)
		return ""
	})
}

func describeLayout(l Layout) string {
	var b strings.Builder
	stride := slotStride(&l)
	fmt.Fprintf(&b, "segment %d bytes; entry %d bytes; slot stride %d; worker block %d\n",
		l.SegmentSize, l.EntrySize, stride, workerStride(l.Counters))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "offset\tsize\t part")
	fmt.Fprintf(w, "%d\t%d\t header\n", 0, headerSize)
	fmt.Fprintf(w, "%d\t%d\t ready buffer\n", l.ready.off, l.ready.size)
	fmt.Fprintf(w, "%d\t%d\t   control line\n", l.ready.off, readyControlSize)
	for s := range uint64(2) {
		off := l.ready.off + readyControlSize + s*stride
		fmt.Fprintf(w, "%d\t%d\t   slot %d header\n", off, slotHeaderSize, s)
		fmt.Fprintf(w, "%d\t%d\t   slot %d entries (%d × %d)\n", off+slotHeaderSize, uint64(l.ReadyCapacity)*uint64(l.EntrySize),
			s, l.ReadyCapacity, l.EntrySize)
	}
	fmt.Fprintf(w, "%d\t%d\t lease table\n", l.lease.off, l.lease.size)
	fmt.Fprintf(w, "%d\t%d\t   control line\n", l.lease.off, lineSize)
	fmt.Fprintf(w, "%d\t%d\t   slots (%d × %d)\n", l.lease.off+lineSize, uint64(l.LeaseCapacity)*leaseSlotSize, l.LeaseCapacity, leaseSlotSize)
	fmt.Fprintf(w, "%d\t%d\t floor cell\n", l.floor.off, l.floor.size)
	fmt.Fprintf(w, "%d\t%d\t worker blocks (%d × %d)\n", l.workers.off, l.workers.size, l.Workers, workerStride(l.Counters))
	fmt.Fprintf(w, "%d\t%d\t host table\n", l.hosts.off, l.hosts.size)
	fmt.Fprintf(w, "%d\t%d\t   control line\n", l.hosts.off, lineSize)
	fmt.Fprintf(w, "%d\t%d\t   slots (%d × %d)\n", l.hosts.off+lineSize, uint64(l.HostCapacity)*hosttable.SlotSize, l.HostCapacity, hosttable.SlotSize)
	fmt.Fprintf(w, "%d\t%d\t   farm shares (%d × 16)\n", l.hosts.off+lineSize+uint64(l.HostCapacity)*hosttable.SlotSize, hosttable.FarmSharesSize, hosttable.FarmShares)
	fmt.Fprintf(w, "%d\t\t end\n", l.SegmentSize)
	w.Flush()
	return b.String()
}

// docField is one row of a table in docs/shm-format.md: offset, size (-1 for "…") and name.
type docField struct {
	off, size int
	name      string
}

// parseFormatDoc reads every "offset size field" table of the format document, keyed by its
// heading ("Header", "Ready buffer / Entry", …).
func parseFormatDoc(t *testing.T) map[string][]docField {
	t.Helper()
	data, err := os.ReadFile("../docs/shm-format.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string][]docField{}
	var h2, key string
	inTable, inFence := false, false
	for n, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inFence, inTable = !inFence, false
			continue
		case strings.HasPrefix(line, "## "):
			h2, key = headingName(line[3:]), headingName(line[3:])
			continue
		case strings.HasPrefix(line, "### "):
			key = h2 + " / " + headingName(line[4:])
			continue
		}
		if !inFence {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "offset" && f[1] == "size" && f[2] == "field" {
			if _, dup := tables[key]; dup {
				t.Fatalf("shm-format.md:%d: a second table under %q", n+1, key)
			}
			tables[key], inTable = []docField{}, true
			continue
		}
		off, err := strconv.Atoi(firstField(f))
		if !inTable || err != nil {
			continue // a note's continuation line, or a drawing
		}
		if len(f) < 3 {
			t.Fatalf("shm-format.md:%d: a row without a field name: %q", n+1, line)
		}
		size := -1
		if f[1] != "…" {
			if size, err = strconv.Atoi(f[1]); err != nil {
				t.Fatalf("shm-format.md:%d: size %q", n+1, f[1])
			}
		}
		tables[key] = append(tables[key], docField{off: off, size: size, name: f[2]})
	}
	return tables
}

func firstField(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// headingName is a heading up to its parenthesis: "Slot i (32 bytes at …)" → "Slot i".
func headingName(h string) string {
	if i := strings.Index(h, " ("); i >= 0 {
		h = h[:i]
	}
	return strings.TrimSpace(h)
}

// A docBlock is one table of the document, placed in a probe segment: where it starts, and
// the value every field must hold there after the probe's operations. A field absent from
// values must be zero (reserved).
type docBlock struct {
	base   uint64
	values map[string]uint64
	bytes  map[string][]byte // variable-length fields, by content
}

// TestFormatDocMatchesCode reads docs/shm-format.md back against the code: the header table's
// offsets and sizes against the header constants, and every table's fields against the bytes
// a segment holds after operations (through the public API) that give each field a known
// value. A field moved in the code, a field the document lacks or invents, a gap or overlap
// between rows, a wrong stride or default size: each fails here.
func TestFormatDocMatchesCode(t *testing.T) {
	doc := parseFormatDoc(t)

	// The header table against the constants.
	hdr := doc["Header"]
	if len(hdr) != len(headerFields) {
		t.Fatalf("the document's header has %d fields, the code %d", len(hdr), len(headerFields))
	}
	for i, f := range headerFields {
		if hdr[i].name != f.name || hdr[i].off != f.off || hdr[i].size != headerFieldSize(i) {
			t.Errorf("header row %d: document %d %d %s, code %d %d %s", i, hdr[i].off, hdr[i].size, hdr[i].name,
				f.off, headerFieldSize(i), f.name)
		}
	}

	blocks, mem := probeSegment(t)
	for key := range doc {
		if _, ok := blocks[key]; !ok {
			t.Errorf("the document has a table %q the test does not know", key)
		}
	}
	for key, blk := range blocks {
		rows, ok := doc[key]
		if !ok {
			t.Errorf("the document has no table %q", key)
			continue
		}
		checkDocBlock(t, key, rows, blk, mem)
	}
}

func checkDocBlock(t *testing.T, key string, rows []docField, blk docBlock, mem []byte) {
	t.Helper()
	seen := map[string]bool{}
	next := 0
	for _, r := range rows {
		if r.off != next {
			t.Errorf("%s: %s at %d, the row before ends at %d", key, r.name, r.off, next)
		}
		next = r.off + r.size
		name := r.name
		if seen[name] {
			name += "#2" // the header names both the worker count and the workers section "workers"
		}
		seen[name] = true
		at := blk.base + uint64(r.off)
		if want, ok := blk.bytes[name]; ok {
			if got := mem[at : at+uint64(len(want))]; string(got) != string(want) {
				t.Errorf("%s: %s at %d holds %q, want %q", key, r.name, r.off, got, want)
			}
			continue
		}
		want, ok := blk.values[name]
		switch {
		case !ok && (r.name == "reserved" || r.name == "zero"):
			for i := at; i < at+uint64(max(r.size, 0)); i++ {
				if mem[i] != 0 {
					t.Errorf("%s: %s at %d is not zero at byte %d", key, r.name, r.off, i-blk.base)
					break
				}
			}
		case !ok:
			t.Errorf("%s: the document names a field %q the code does not have", key, r.name)
		default:
			n := r.size
			if n < 0 || n > 8 {
				n = 8 // a variable or wide field: its first word
			}
			if got := readLE(mem[at:], n); got != want&sizeMask(n) {
				t.Errorf("%s: %s at offset %d (%d bytes) holds %#x, want %#x", key, r.name, r.off, n, got, want)
			}
		}
	}
	for _, m := range []map[string]uint64{blk.values, bytesNames(blk.bytes)} {
		for name := range m {
			if !seen[name] {
				t.Errorf("%s: the document lacks the field %q", key, name)
			}
		}
	}
}

func bytesNames(b map[string][]byte) map[string]uint64 {
	out := map[string]uint64{}
	for name := range b {
		out[name] = 0
	}
	return out
}

func readLE(b []byte, size int) uint64 {
	var buf [8]byte
	copy(buf[:], b[:size])
	return binary.LittleEndian.Uint64(buf[:])
}

func sizeMask(size int) uint64 {
	if size >= 8 {
		return math.MaxUint64
	}
	return 1<<(8*size) - 1
}

// probeSegment formats a small segment, drives every documented field to a known value
// through the public API, and returns each table's placement and expected values.
func probeSegment(t *testing.T) (map[string]docBlock, []byte) {
	t.Helper()
	opts := Options{ReadyCapacity: 7, KeyCapacity: 40, LeaseCapacity: 64, LeaseWindow: 5, Workers: 3, HostCapacity: 5, EpochMs: 1_000_000}
	size, err := SizeFor(opts)
	if err != nil {
		t.Fatal(err)
	}
	mem := AlignedMemory(int(size))
	seg, err := Format(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := seg.Layout()
	blocks := map[string]docBlock{}

	hv := map[string]uint64{
		"version": uint64(LayoutVersion), "headerSize": headerSize, "segmentSize": l.SegmentSize,
		"creatorPID": l.CreatorPID, "epochMs": uint64(l.EpochMs), "readyCapacity": 7, "keyCapacity": 40,
		"entrySize": 80, "leaseCapacity": 64, "leaseWindow": 5, "workers": 3, "counters": CountersPerWorker, "hostCapacity": 5,
		"checksum": uint64(crc32c(mem[:hChecksum])),
	}
	// The section table: 16 bytes each, offset then size. The document's rows are checked for
	// the offset word; both words are checked here.
	for i, s := range []section{l.ready, l.lease, l.floor, l.workers, l.hosts} {
		if got := [2]uint64{readLE(mem[hSections+16*i:], 8), readLE(mem[hSections+16*i+8:], 8)}; got != [2]uint64{s.off, s.size} {
			t.Errorf("section %d in the header: %v, want %v", i, got, s)
		}
		hv[[]string{"ready", "lease", "floor", "workers#2", "hosts"}[i]] = s.off
	}
	blocks["Header"] = docBlock{base: 0, values: hv, bytes: map[string][]byte{"magic": []byte("FRESHQSM")}}

	// Ready buffer: three publishes (the third lands in slot 1), one take, then disabled.
	ready := seg.Ready()
	key := []byte("desktop|https://a.test/p/1")
	first := Entry{Score: 2.5, DueAtMs: 111, CadenceMs: 222, Submitted: true, Checkable: true, Lane: 3, Key: key, Fence: 9}
	long := Entry{Key: []byte(strings.Repeat("k", 41))}
	ready.Publish([]Entry{first, first}, 2_000_000)
	many := []Entry{long, long}
	for range 8 {
		many = append(many, first)
	}
	ready.Publish(many, 2_000_100)
	ready.Publish([]Entry{first, {Score: 1, Key: []byte("b")}, {Score: 0.5, Key: []byte("c")}}, 2_000_200)
	var e Entry
	ready.Take(&e)
	ready.Take(&e)
	ready.SetEnabled(false)
	st := ready.Stats()
	blocks["Ready buffer / Control line"] = docBlock{base: l.ready.off, values: map[string]uint64{
		"active": st.Gen, "flags": flagDisabled, "publishes": st.Publishes, "droppedKeys": st.DroppedKeys,
		"overCapacity": st.OverCapacity,
	}}
	if st.Gen != 3 || st.DroppedKeys == 0 || st.OverCapacity == 0 {
		t.Fatalf("the probe's publishes did not do what it needs: %+v", st)
	}
	// The slot stride as the document states it: 128 + align64(readyCapacity × entrySize).
	docStride := 128 + (uint64(7*80)+63)/64*64
	slot1 := l.ready.off + 64 + 1*docStride
	blocks["Ready buffer / Slot s"] = docBlock{base: slot1, values: map[string]uint64{
		"gen": 3, "count": 3, "publishedAt": 2_000_200, "cursor": 3<<32 | 2, "entries": math.Float64bits(2.5),
	}}
	blocks["Ready buffer / Entry"] = docBlock{base: slot1 + 128, values: map[string]uint64{
		"score": math.Float64bits(2.5), "dueAt": 111, "cadence": 222, "keyHash": KeyHash(key),
		"keyLen": uint64(len(key)), "flags": entryFlagSubmitted | entryFlagCheckable, "lane": 3, "fence": 9,
	}, bytes: map[string][]byte{"key": key}}

	// Lease table: three refusals of a held key, one of a full window, two graces taken over.
	leases := seg.Leases()
	const now, ttl, holder = 1_500_000, 60_000, 0xABCD
	lease, status := leases.Acquire(3, now, ttl, holder)
	if status != Acquired {
		t.Fatalf("acquire: %v", status)
	}
	for range 3 {
		leases.Acquire(3, now, ttl, holder)
	}
	var others []Lease
	for k := uint64(1); k <= 4; k++ {
		ls, _ := leases.Acquire(3+64*k, now, ttl, holder) // the same home slot: the window fills
		others = append(others, ls)
	}
	leases.Acquire(3+64*5, now, ttl, holder) // full
	for i := range 2 {
		leases.Release(others[i], now, 1000)
		leases.Acquire(3+64*uint64(6+i), now, ttl, holder) // takes the grace over
	}
	ls := leases.Stats(now)
	if ls.RefusedHeld != 3 || ls.RefusedFull != 1 || ls.GracesEvicted != 2 {
		t.Fatalf("the probe's acquires did not do what it needs: %+v", ls)
	}
	blocks["Lease table / Control line"] = docBlock{base: l.lease.off, values: map[string]uint64{
		"refusedHeld": ls.RefusedHeld, "refusedFull": ls.RefusedFull, "refusedContended": ls.RefusedContended,
		"gracesEvicted": ls.GracesEvicted,
	}}
	blocks["Lease table / Slot i"] = docBlock{base: l.lease.off + 64 + 32*uint64(lease.Slot), values: map[string]uint64{
		"state": lease.State, "keyHash": 3, "holder": holder, "acquiredAt": now,
	}}

	// Floor cell.
	fl := seg.Floor()
	fl.Advance(0, 5_000)
	fl.SetPin(77, 6_000)
	fl.SetNextDue(7_000)
	fl.SetAdvancedAt(8_000)
	fe := seg.Fence()
	fe.Bump()
	fe.Bump()
	fe.SetGrantUntil(9_000)
	blocks["Floor cell"] = docBlock{base: l.floor.off, values: map[string]uint64{
		"floor": 5_000, "pinHash": 77, "pinSince": 6_000, "nextDue": 7_000, "advancedAt": 8_000,
		"fence": 2, "grantUntil": 9_000,
	}}

	// Worker block 1, at workers.off + 1 × 1088 as the document states it.
	wk, err := seg.Worker(1)
	if err != nil {
		t.Fatal(err)
	}
	wk.Start(4242, 9_000)
	wk.Beat(9_500)
	wk.Beat(9_600)
	for range 3 {
		wk.NoteRestart()
	}
	wk.Add(0, 11) // counter 0 holds the block's first counter word
	wk.Add(CountersPerWorker-1, 13)
	base := l.workers.off + 1*1088
	blocks["Worker blocks"] = docBlock{base: base, values: map[string]uint64{
		"pid": 4242, "heartbeat": 9_600, "beats": 2, "startedAt": 9_000, "restarts": 3, "counters": 11,
	}}
	if got := readLE(mem[base+64+8*(CountersPerWorker-1):], 8); got != 13 {
		t.Errorf("worker counter %d at 64 + 8×%d: %d, want 13", CountersPerWorker-1, CountersPerWorker-1, got)
	}

	// Host table: one host stored twice (seq 4), one stored and deleted, one store evicting
	// nobody. Its slot is found the way Load finds it.
	hosts := seg.Hosts()
	shop := HostState{Host: "shop.example:8443", PausedUntilMs: 12_000, Limit: 2, ErrStreak: 3, OKStreak: 1,
		SinceMs: 10_000, Cause: HostCauseRetryAfter, Status: 429}
	hosts.Store(shop)
	hosts.Store(shop)
	gone := HostState{Host: "gone.example"}
	hosts.Store(gone)
	hosts.Delete(HostHash([]byte(gone.Host)))
	hs := hosts.Stats()
	// The farm words' meaning is package hosts' (its TestMembershipWords); here, their places.
	farm := uint64(1 | 3<<16 | 0<<32 | 0xffff<<48)
	farmHash := HostHash([]byte("shop.example"))
	hosts.StoreFarmShares([FarmWords]uint64{farm, 20_000, 4500 | 18_000<<32, 42 | 43<<32, uint64(0xffff_ffff_ffff_fff9)},
		[]uint64{farmHash}, []uint64{2 | 1<<16})
	blocks["Host table / Control line"] = docBlock{base: l.hosts.off, values: map[string]uint64{
		"stores": hs.Stores, "evictions": hs.Evictions,
		"farm": farm, "farmSince": 20_000, "farmGrace": 4500 | 18_000<<32, "farmRounds": 42 | 43<<32,
		"farmOffset": uint64(0xffff_ffff_ffff_fff9), "farmSeq": 2,
	}}
	blocks["Host table / Farm shares"] = docBlock{base: l.hosts.off + 64 + hosttable.SlotSize*uint64(l.HostCapacity), values: map[string]uint64{
		"hash": farmHash, "share": 2 | 1<<16,
	}}
	h := HostHash([]byte(shop.Host))
	slot := h % uint64(l.HostCapacity)
	for readLE(mem[l.hosts.off+64+hosttable.SlotSize*slot+8:], 8) != h {
		slot = (slot + 1) % uint64(l.HostCapacity)
	}
	blocks["Host table / Slot i"] = docBlock{base: l.hosts.off + 64 + hosttable.SlotSize*slot, values: map[string]uint64{
		"seq": 4, "hash": h, "pausedUntil": 12_000, "limit": 2, "streaks": 3 | 1<<32, "since": 10_000,
		"info": uint64(HostCauseRetryAfter) | 429<<8 | uint64(len(shop.Host))<<24,
	}, bytes: map[string][]byte{"host": []byte(shop.Host)}}

	// The figure the document quotes for the defaults.
	if def, _ := SizeFor(Options{}); def != 3_448_832 {
		t.Errorf("the default segment is %d bytes; the document says 3,448,832", def)
	}
	return blocks, mem
}
