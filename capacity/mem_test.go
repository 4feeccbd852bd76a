package capacity

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// TestLedgerMemoryPerRow reports what the ledger holds per row (it keeps one entry per key to
// know a write's old contribution): run with -v to see it.
func TestLedgerMemoryPerRow(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a ledger of 200k rows")
	}
	pol := testPolicy(t)
	l := NewLedger(func() *policy.Policy { return pol })
	const n = 200_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("desktop|https://example.test/p/%d", i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		l.Put(k, store.Row{DueAtMs: 1, Projection: store.Projection{Submitted: true}}, nil)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l)
	per := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	t.Logf("ledger: %.0f bytes per row", per)
	if per > 48 {
		t.Errorf("%.0f bytes per row, over 48", per)
	}
	runtime.KeepAlive(keys)
}
