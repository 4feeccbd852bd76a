package shm

import (
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
)

func newTestSegment(t testing.TB, opts Options) *Segment {
	t.Helper()
	if opts.EpochMs == 0 {
		opts.EpochMs = 1_000_000
	}
	seg, err := Create(filepath.Join(t.TempDir(), "seg"), opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { seg.Close() })
	return seg
}

// checkedEntry builds entry i of generation g so that every field is a function of (g, i) and
// the key ends in a crc32 of everything before it. A reader can then prove an entry is neither
// torn nor from another generation. keyLen varies with i so copies of different lengths race.
func checkedEntry(g uint64, i int, maxKey int) Entry {
	body := fmt.Sprintf("https://example.test/g%d/i%d/", g, i)
	want := 24 + (i*7+int(g))%max(1, maxKey-24-8)
	if len(body) < want {
		body += strings.Repeat("x", want-len(body))
	}
	key := fmt.Sprintf("%s%08x", body, crc32.ChecksumIEEE([]byte(body)))
	return Entry{
		Score:     float64(g)*1e6 + float64(i),
		DueAtMs:   int64(g),
		CadenceMs: int64(i),
		Submitted: (g+uint64(i))%2 == 0,
		Checkable: (g+uint64(i))%3 == 0,
		Lane:      uint8((g + uint64(i)) % 4),
		Key:       []byte(key),
	}
}

// verifyEntry reports why e is not exactly what checkedEntry(e.Gen, e.Index) published.
func verifyEntry(e *Entry) error {
	k := string(e.Key)
	if len(k) < 8 {
		return fmt.Errorf("key %q too short", k)
	}
	body, sum := k[:len(k)-8], k[len(k)-8:]
	if fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(body))) != sum {
		return fmt.Errorf("torn key %q", k)
	}
	if !strings.HasPrefix(body, fmt.Sprintf("https://example.test/g%d/i%d/", e.Gen, e.Index)) {
		return fmt.Errorf("key %q is not entry %d of generation %d", k, e.Index, e.Gen)
	}
	g, i := e.Gen, uint64(e.Index)
	if e.Score != float64(g)*1e6+float64(i) || e.DueAtMs != int64(g) || e.CadenceMs != int64(i) ||
		e.Submitted != ((g+i)%2 == 0) || e.Checkable != ((g+i)%3 == 0) || e.Lane != uint8((g+i)%4) || e.KeyHash != KeyHash(e.Key) {
		return fmt.Errorf("fields of (%d,%d) torn: %+v", g, i, *e)
	}
	return nil
}

func checkedSet(g uint64, n, maxKey int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = checkedEntry(g, i, maxKey)
	}
	return es
}
