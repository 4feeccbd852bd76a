package storetest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/store"
)

// Options is what a conformance test asks of the store it opens. Everything else is the
// backend's default.
type Options struct {
	// Floor is the node's floor cell (nil: the backend's default, a store.MemFloor at 0).
	Floor store.FloorCell
	// RefuseImplausibleDue is the backends' option of that name.
	RefuseImplausibleDue bool
	// TestSignals are passed to the backend as they are.
	TestSignals store.TestSignals
	// Reopen, when set, is a store this Opener returned and that has since been closed: the
	// Opener opens the same data again instead of a fresh store.
	Reopen store.Store
}

// Opener opens a fresh, empty store with o (or reopens o.Reopen), and closes it at t.Cleanup.
// The store it returns also implements Backdoor. It fails t if it cannot.
type Opener func(t testing.TB, o Options) store.Store

// Backdoor is what a backend's Opener gives the suite besides the contract: the few reads and
// writes behind the funnel's back that some tests need.
type Backdoor interface {
	// LoseRow deletes cacheKey's schedule row (and its due-index entry) but leaves its target
	// and page, as a write lost behind the funnel's back would.
	LoseRow(t testing.TB, cacheKey []byte)
	// Floors reads, now, the floor that bounds each row: the node's floor cell on a backend
	// with one floor, the floor of the row's shard on a sharded one.
	Floors(t testing.TB) (floorOf func(cacheKey []byte) int64)
}

type test struct {
	name string
	fn   func(t *testing.T, open Opener)
}

var tests = []test{
	// The funnel.
	{"FunnelRejectsUnsetSchedule", testFunnelRejectsUnsetSchedule},
	{"FunnelPutRescheduleDelete", testFunnelPutRescheduleDelete},
	{"FunnelWriteCarriesTargetAndPage", testFunnelWriteCarriesTargetAndPage},
	{"FunnelMirrorsWhetherTheOriginSentValidators", testFunnelMirrorsWhetherTheOriginSentValidators},
	{"FunnelSameKeyArrivalOrder", testFunnelSameKeyArrivalOrder},
	{"FunnelConcurrentWriters", testFunnelConcurrentWriters},
	{"FunnelRefusesImplausibleDue", testFunnelRefusesImplausibleDue},
	{"ClosedStore", testClosedStore},
	{"CloseDrainsAndReopens", testCloseDrainsAndReopens},
	{"CloseClosesOpenPasses", testCloseClosesOpenPasses},
	{"RefileIfUnchanged", testRefileIfUnchanged},
	{"DropPageInTheSameWrite", testDropPageInTheSameWrite},
	{"ForEachSchedulePrefix", testForEachSchedulePrefix},
	{"ListSchedule", testListSchedule},
	{"TargetKeepsFreshness", testTargetKeepsFreshness},
	{"TargetKeepsVerdict", testTargetKeepsVerdict},
	{"RankIntervalReadsBack", testRankIntervalReadsBack},
	// Modify.
	{"ModifyDecidesOnCurrentRowAndTarget", testModifyDecidesOnCurrent},
	{"ModifyNotOKWritesNothing", testModifyNotOKWritesNothing},
	{"ModifyMissingRow", testModifyMissingRow},
	{"ModifyRefusesBadDecision", testModifyRefusesBadDecision},
	{"ModifySameKeyInOneCall", testModifySameKeyInOneCall},
	{"ModifyConcurrentWithWritesLosesNoUpdate", testModifyConcurrentWithWrites},
	// Scans and passes.
	{"ScanDue", testScanDue},
	{"ScanDueAfterPagesByDueAndKey", testScanDueAfterPagesByDueAndKey},
	{"PassIterateDueChunks", testPassIterateDueChunks},
	{"PassIterateDueCapAndErrors", testPassIterateDueCapAndErrors},
	{"PassIterateDueStopsOnFnErrorAndPanic", testPassIterateDueStopsOnFnErrorAndPanic},
	{"PassReadsItsSnapshot", testPassReadsItsSnapshot},
	// The floor.
	{"WritesLowerTheFloor", testWritesLowerTheFloor},
	{"AdvanceFloorBounds", testAdvanceFloorBounds},
	{"AdvanceFloorAfterStoppedPass", testAdvanceFloorAfterStoppedPass},
	{"AdvanceFloorCountsWriteInFlight", testAdvanceFloorCountsWriteInFlight},
	{"HeadIsTheFloorWithoutItsGuard", testHeadIsTheFloorWithoutItsGuard},
	{"FloorInterleaving", testFloorInterleaving},
	{"ClassIndexReadsTheDueSet", testClassIndexReadsTheDueSet},
	// Maintenance.
	{"ReconcileRestoresMissingRows", testReconcileRestoresMissingRows},
}

// Run runs every conformance test against the backend open opens, each as a subtest of t.
func Run(t *testing.T, open Opener) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// backdoor is st's Backdoor, or fails t.
func backdoor(t testing.TB, st store.Store) Backdoor {
	t.Helper()
	b, ok := st.(Backdoor)
	if !ok {
		t.Fatalf("the Opener's store %T does not implement storetest.Backdoor", st)
	}
	return b
}

// Hook is a store.TestSignals hook a test can set and clear while the store runs: the store
// is opened with Hook.Run, which calls whatever function the hook holds at the time.
type Hook struct{ fn atomic.Pointer[func()] }

// Set makes fn the hook's function; nil clears it.
func (h *Hook) Set(fn func()) {
	if fn == nil {
		h.fn.Store(nil)
		return
	}
	h.fn.Store(&fn)
}

// Run calls the hook's function, if any.
func (h *Hook) Run() {
	if fn := h.fn.Load(); fn != nil {
		(*fn)()
	}
}

func mustSchedule(t testing.TB, key string, due int64, submitted bool, eff int64, lanes store.Lanes) store.Schedule {
	t.Helper()
	s, err := store.NewSchedule([]byte(key), due, submitted, eff, lanes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t testing.TB, key string, due int64) store.Write {
	t.Helper()
	return store.Write{Schedule: mustSchedule(t, key, due, false, 0, store.Lanes{})}
}

func mustWrite(t testing.TB, st store.Store, ws ...store.Write) {
	t.Helper()
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
}

func mustVerify(t testing.TB, st store.Store) store.IndexReport {
	t.Helper()
	rep, err := st.VerifyIndex()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("index and rows disagree: %+v", rep)
	}
	return rep
}

// fill writes n rows due at base, base+step, … and returns their keys in due order.
func fill(t testing.TB, st store.Store, n int, base, step int64) []string {
	t.Helper()
	keys := make([]string, n)
	ws := make([]store.Write, n)
	for i := range n {
		keys[i] = urlKey(i)
		ws[i] = store.Write{Schedule: mustSchedule(t, keys[i], base+int64(i)*step, i%3 == 0, int64(i), store.Lanes{Failing: i%5 == 0})}
	}
	mustWrite(t, st, ws...)
	return keys
}

func urlKey(i int) string {
	return fmt.Sprintf("desktop|https://www.example-shop.com/catalog/p/%08d", i)
}

func sampleTarget() store.Target {
	return store.Target{
		URL: "https://example.com/a?b=c", Device: "mobile", Source: store.SourceDiscovered,
		StoredIntervalMs: 3_600_000, Route: "product", DemandRung: 2,
		Failures: store.Failures{Count: 3, LastClass: "timeout", FirstMs: 10, LastMs: 20},
		Terminal: store.TerminalSuppressed, TerminalRecheckMs: 99,
		LastRender: store.RenderSummary{Status: 200, AtMs: 1234, DurationMs: 800, Bytes: 4096},
	}
}

func samplePage() store.Page {
	return store.Page{Status: 200, RenderedAtMs: 1_700_000_000_000,
		Headers: []store.Header{{Name: "Content-Type", Value: "text/html"}, {Name: "Vary", Value: ""}},
		Body:    []byte("<html>hi</html>")}
}

// RunPass opens a pass of st at now and iterates it to the end, for backends' own tests too.
func RunPass(t testing.TB, st store.Store, now int64) store.Pass {
	t.Helper()
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.IterateDue(0, 64, func([]store.DueRow) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return p
}

func isErr(err, target error) bool { return errors.Is(err, target) }
