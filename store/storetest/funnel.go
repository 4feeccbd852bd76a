package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
)

func testFunnelRejectsUnsetSchedule(t *testing.T, open Opener) {
	st := open(t, Options{})
	if err := st.WriteSchedule(store.Schedule{}); !isErr(err, store.ErrScheduleUnset) {
		t.Fatalf("zero Schedule: %v", err)
	}
	ok := mustSchedule(t, "a", 1, false, 0, store.Lanes{})
	// One bad write refuses the whole call before anything is enqueued.
	if err := st.WriteSchedules([]store.Write{{Schedule: ok}, {}}); !isErr(err, store.ErrScheduleUnset) {
		t.Fatalf("call with a zero Schedule: %v", err)
	}
	bad := sampleTarget()
	bad.Source = 0
	if err := st.WriteSchedules([]store.Write{{Schedule: ok, Target: &bad}}); !isErr(err, store.ErrInvalidTarget) {
		t.Fatalf("invalid target: %v", err)
	}
	if err := st.WriteSchedules([]store.Write{{Schedule: ok, Page: &store.Page{Headers: []store.Header{{}}}}}); !isErr(err, store.ErrInvalidPage) {
		t.Fatalf("invalid page: %v", err)
	}
	if _, err := st.GetSchedule([]byte("a")); !isErr(err, store.ErrNotFound) {
		t.Fatalf("a refused call wrote something: %v", err)
	}
	if err := st.WriteSchedules(nil); err != nil {
		t.Fatalf("empty call: %v", err)
	}
}

func testFunnelPutRescheduleDelete(t *testing.T, open Opener) {
	st := open(t, Options{})
	k := urlKey(1)
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, k, 1000, true, 3600, store.Lanes{NeverRendered: true})})
	r, err := st.GetSchedule([]byte(k))
	if err != nil || r.DueAtMs != 1000 || !r.Submitted || r.EffectiveIntervalMs != 3600 || !r.NeverRendered {
		t.Fatalf("after put: %+v %v", r, err)
	}
	mustVerify(t, st)

	// Reschedule: the old index entry goes, the new one comes, in one transaction.
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, k, 5000, false, 0, store.Lanes{})})
	res, err := st.ScanDue(0, 10_000, 10)
	if err != nil || len(res.Rows) != 1 || res.Rows[0].DueAtMs != 5000 || res.Rows[0].Submitted {
		t.Fatalf("after reschedule: %+v %v", res, err)
	}
	if rep := mustVerify(t, st); rep.Rows != 1 || rep.Entries != 1 {
		t.Fatalf("after reschedule: %+v", rep)
	}
	// Same due time, new projection: the entry's value changes in place.
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, k, 5000, true, 60, store.Lanes{Urgent: true})})
	res, _ = st.ScanDue(0, 10_000, 10)
	if len(res.Rows) != 1 || !res.Rows[0].Urgent || res.Rows[0].EffectiveIntervalMs != 60 {
		t.Fatalf("after in-place update: %+v", res)
	}
	mustVerify(t, st)

	if err := st.DeleteTarget([]byte(k)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSchedule([]byte(k)); !isErr(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if rep := mustVerify(t, st); rep.Rows != 0 || rep.Entries != 0 {
		t.Fatalf("after delete: %+v", rep)
	}
	if err := st.DeleteTarget([]byte(k)); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if err := st.DeleteTarget(nil); !isErr(err, store.ErrEmptyKey) {
		t.Fatalf("deleting an empty key: %v", err)
	}
}

func testFunnelWriteCarriesTargetAndPage(t *testing.T, open Opener) {
	st := open(t, Options{})
	k := []byte(urlKey(7))
	tg, pg := sampleTarget(), samplePage()
	pg.Body = []byte(strings.Repeat("<p>body</p>", 400)) // large: Badger's value log
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, string(k), 100, false, 0, store.Lanes{}), Target: &tg, Page: &pg})
	gt, err := st.GetTarget(k)
	if err != nil || gt.URL != tg.URL || gt.Failures != tg.Failures {
		t.Fatalf("target: %+v %v", gt, err)
	}
	gp, err := st.GetPage(k)
	if err != nil || string(gp.Body) != string(pg.Body) || len(gp.Headers) != 2 {
		t.Fatalf("page: %v", err)
	}
	// The target's stored interval is mirrored into the projection...
	r, _ := st.GetSchedule(k)
	if r.StoredIntervalMs != tg.StoredIntervalMs {
		t.Fatalf("stored interval not mirrored: %+v", r)
	}
	// ...and carried over by a later write without a target.
	mustWrite(t, st, put(t, string(k), 200))
	res, _ := st.ScanDue(0, 1000, 10)
	if len(res.Rows) != 1 || res.Rows[0].StoredIntervalMs != tg.StoredIntervalMs {
		t.Fatalf("stored interval not carried over: %+v", res.Rows)
	}
	tg.StoredIntervalMs = 42
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, string(k), 200, false, 0, store.Lanes{}), Target: &tg})
	if r, _ := st.GetSchedule(k); r.StoredIntervalMs != 42 {
		t.Fatalf("stored interval not updated: %+v", r)
	}
	if err := st.DeleteTarget(k); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetTarget(k); !isErr(err, store.ErrNotFound) {
		t.Fatalf("target after delete: %v", err)
	}
	if _, err := st.GetPage(k); !isErr(err, store.ErrNotFound) {
		t.Fatalf("page after delete: %v", err)
	}
}

func testFunnelSameKeyArrivalOrder(t *testing.T, open Opener) {
	st := open(t, Options{})
	var ws []store.Write
	for i := range 50 {
		ws = append(ws, store.Write{Schedule: mustSchedule(t, "k", int64(1000-i*7), i%2 == 0, int64(i), store.Lanes{})})
	}
	mustWrite(t, st, ws...)
	r, err := st.GetSchedule([]byte("k"))
	if err != nil || r.DueAtMs != 1000-49*7 || r.EffectiveIntervalMs != 49 {
		t.Fatalf("last write did not win: %+v %v", r, err)
	}
	if rep := mustVerify(t, st); rep.Entries != 1 {
		t.Fatalf("%+v", rep)
	}
}

// Group commit: concurrent callers are all acknowledged, and each finds its write.
func testFunnelConcurrentWriters(t *testing.T, open Opener) {
	var batches, writes int
	var mu sync.Mutex
	st := open(t, Options{TestSignals: store.TestSignals{BeforeCommit: func() { mu.Lock(); batches++; mu.Unlock() }}})
	const writers, each = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("w%d|%d", w, i)
				s, _ := store.NewSchedule([]byte(k), int64(w*each+i), w%2 == 0, 0, store.Lanes{})
				if err := st.WriteSchedule(s); err != nil {
					errs <- err
					return
				}
				if r, err := st.GetSchedule([]byte(k)); err != nil || r.DueAtMs != int64(w*each+i) {
					errs <- fmt.Errorf("acknowledged write %s not visible: %+v %v", k, r, err)
					return
				}
				mu.Lock()
				writes++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if rep := mustVerify(t, st); rep.Rows != writers*each {
		t.Fatalf("%+v", rep)
	}
	t.Logf("%d writes in %d batches", writes, batches)
}

// With RefuseImplausibleDue, the funnel refuses a due time before MinDueMs or after MaxDueMs
// on every write path, and writes nothing; without it, any non-negative due time is filed.
func testFunnelRefusesImplausibleDue(t *testing.T, open Opener) {
	st := open(t, Options{RefuseImplausibleDue: true})
	const key = "desktop|https://a.test/"
	for _, due := range []int64{0, store.MinDueMs - 1, store.MaxDueMs + 1} {
		sch := mustSchedule(t, key, due, false, 0, store.Lanes{})
		if err := st.WriteSchedules([]store.Write{{Schedule: sch}}); !isErr(err, store.ErrImplausibleDue) {
			t.Fatalf("due %d: %v", due, err)
		}
		if _, err := st.RefileIfUnchanged(sch, store.Row{}); !isErr(err, store.ErrImplausibleDue) {
			t.Fatalf("refile due %d: %v", due, err)
		}
		applied, err := st.Modify([]store.Change{{Key: []byte(key), Decide: func(store.Current) (store.Write, bool, error) {
			return store.Write{Schedule: sch}, true, nil
		}}})
		if !isErr(err, store.ErrImplausibleDue) || slices.Contains(applied, true) {
			t.Fatalf("modify due %d: applied %v, %v", due, applied, err)
		}
	}
	if _, err := st.GetSchedule([]byte(key)); !isErr(err, store.ErrNotFound) {
		t.Fatalf("an implausible due time was filed: %v", err)
	}
	for _, due := range []int64{store.MinDueMs, store.MaxDueMs} {
		mustWrite(t, st, put(t, key, due))
	}
	mustWrite(t, open(t, Options{}), put(t, key, 0))
}

func testClosedStore(t *testing.T, open Opener) {
	st := open(t, Options{})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s := mustSchedule(t, "k", 1, false, 0, store.Lanes{})
	if err := st.WriteSchedule(s); !isErr(err, store.ErrClosed) {
		t.Fatalf("write: %v", err)
	}
	if _, err := st.Modify([]store.Change{{Key: []byte("k"), Decide: func(store.Current) (store.Write, bool, error) {
		return store.Write{Schedule: s}, true, nil
	}}}); !isErr(err, store.ErrClosed) {
		t.Fatalf("modify: %v", err)
	}
	if _, err := st.RefileIfUnchanged(s, store.Row{}); !isErr(err, store.ErrClosed) {
		t.Fatalf("refile: %v", err)
	}
	if err := st.DeleteTarget([]byte("k")); !isErr(err, store.ErrClosed) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := st.GetSchedule([]byte("k")); !isErr(err, store.ErrClosed) {
		t.Fatalf("get: %v", err)
	}
	if _, err := st.ScanDue(0, 1, 1); !isErr(err, store.ErrClosed) {
		t.Fatalf("scan: %v", err)
	}
	if _, err := st.BeginPass(1); !isErr(err, store.ErrClosed) {
		t.Fatalf("pass: %v", err)
	}
	if _, err := st.Reconcile(1); !isErr(err, store.ErrClosed) {
		t.Fatalf("reconcile: %v", err)
	}
	if _, err := st.VerifyIndex(); !isErr(err, store.ErrClosed) {
		t.Fatalf("verify: %v", err)
	}
	st.StartGC() // after Close: a no-op
	st.StopGC()
}

// Close drains: every call acknowledged before Close is committed and survives a reopen.
func testCloseDrainsAndReopens(t *testing.T, open Opener) {
	st := open(t, Options{})
	var wg sync.WaitGroup
	acked := make(chan string, 1000)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; i <= 200; i++ {
				k := fmt.Sprintf("w%d|%d", w, i)
				s, _ := store.NewSchedule([]byte(k), int64(i), false, 0, store.Lanes{})
				if err := st.WriteSchedule(s); err != nil {
					return // ErrClosed
				}
				acked <- k
			}
		})
	}
	var seen []string
	for range 50 {
		seen = append(seen, <-acked)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(acked)
	st = open(t, Options{Reopen: st})
	for k := range acked {
		seen = append(seen, k)
	}
	for _, k := range seen {
		if _, err := st.GetSchedule([]byte(k)); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	mustVerify(t, st)
	t.Logf("%d acknowledged writes survived Close and reopen", len(seen))
}

// Close closes the passes still open: a sweep stopped mid-pass must not keep the store from
// closing. (The wait is bounded only so that a failure is reported rather than hung.)
func testCloseClosesOpenPasses(t *testing.T, open Opener) {
	st := open(t, Options{})
	fill(t, st, 5, 100, 1)
	iterated, _ := st.BeginPass(1000)
	_ = iterated.IterateDue(0, 2, func([]store.DueRow) error { return nil })
	if _, err := st.BeginPass(1000); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return in 30 s with two passes open")
	}
	if err := iterated.IterateDue(0, 1, nil); !isErr(err, store.ErrClosed) && !isErr(err, store.ErrPassIterated) {
		t.Fatalf("a pass after Close: %v", err)
	}
	iterated.Close() // after the store's Close: a no-op
}

// RefileIfUnchanged files only over the row it was given: not over a row written since, not
// over a deleted one; and a refused refile writes nothing at all.
func testRefileIfUnchanged(t *testing.T, open Opener) {
	st := open(t, Options{})
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "k", 1_000, true, 6*3_600_000, store.Lanes{Failing: true})})
	was, err := st.GetSchedule([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	forward := mustSchedule(t, "k", 9_000, true, 24*3_600_000, store.Lanes{Failing: true})

	// Written since: refused, and the newer row stands.
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "k", 5_000, true, 6*3_600_000, store.Lanes{})})
	if filed, err := st.RefileIfUnchanged(forward, was); err != nil || filed {
		t.Fatalf("refile over a changed row: filed %v, %v", filed, err)
	}
	if row, _ := st.GetSchedule([]byte("k")); row.DueAtMs != 5_000 || row.Failing {
		t.Fatalf("row after a refused refile: %+v", row)
	}

	// Unchanged: filed.
	was, _ = st.GetSchedule([]byte("k"))
	if filed, err := st.RefileIfUnchanged(forward, was); err != nil || !filed {
		t.Fatalf("refile over the same row: filed %v, %v", filed, err)
	}
	if row, _ := st.GetSchedule([]byte("k")); row.DueAtMs != 9_000 || row.EffectiveIntervalMs != 24*3_600_000 {
		t.Fatalf("row after the refile: %+v", row)
	}

	// Deleted: refused, nothing resurrected.
	was, _ = st.GetSchedule([]byte("k"))
	if err := st.DeleteTarget([]byte("k")); err != nil {
		t.Fatal(err)
	}
	if filed, err := st.RefileIfUnchanged(forward, was); err != nil || filed {
		t.Fatalf("refile over a deleted row: filed %v, %v", filed, err)
	}
	if _, err := st.GetSchedule([]byte("k")); !isErr(err, store.ErrNotFound) {
		t.Fatalf("a refused refile resurrected the row: %v", err)
	}
	mustVerify(t, st)
	if _, err := st.RefileIfUnchanged(store.Schedule{}, was); !isErr(err, store.ErrScheduleUnset) {
		t.Fatalf("zero schedule: %v", err)
	}
}

func testDropPageInTheSameWrite(t *testing.T, open Opener) {
	st := open(t, Options{})
	key := "desktop|https://a.test/x"
	page := &store.Page{Status: 200, Body: []byte("<html/>"), RenderedAtMs: 5}
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 100, true, 0, store.Lanes{}), Page: page})
	if _, err := st.GetPage([]byte(key)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 200, true, 0, store.Lanes{}), DropPage: true})
	if _, err := st.GetPage([]byte(key)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("page after DropPage: %v", err)
	}
	if row, err := st.GetSchedule([]byte(key)); err != nil || row.DueAtMs != 200 {
		t.Fatalf("row %+v %v", row, err)
	}
	// A Page in the same Write wins over DropPage.
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 300, true, 0, store.Lanes{}), Page: page, DropPage: true})
	if _, err := st.GetPage([]byte(key)); err != nil {
		t.Fatalf("page set with DropPage: %v", err)
	}
	mustVerify(t, st)
}

func testForEachSchedulePrefix(t *testing.T, open Opener) {
	st := open(t, Options{})
	for _, k := range []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2", "desktop|https://a.test/p/1", "mobile|https://a.test/c/1"} {
		mustWrite(t, st, store.Write{Schedule: mustSchedule(t, k, 100, true, 0, store.Lanes{})})
	}
	var got []string
	if err := st.ForEachSchedule([]byte("desktop|https://a.test/c/"), func(k []byte, r store.Row) error {
		if r.DueAtMs != 100 {
			t.Errorf("%s: row %+v", k, r)
		}
		got = append(got, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	got = got[:0]
	if err := st.ForEachSchedule(nil, func(k []byte, _ store.Row) error { got = append(got, string(k)); return nil }); err != nil || len(got) != 4 || !slices.IsSorted(got) {
		t.Fatalf("every row, in key order: %q %v", got, err)
	}
	stop := errors.New("stop")
	if err := st.ForEachSchedule(nil, func([]byte, store.Row) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("stop error: %v", err)
	}
}

// A row's Checkable mirrors its target's validators as StoredIntervalMs mirrors its interval:
// taken from the target a write or a Change carries, carried over by a write without one, and
// read back the same by every way the sweep and the claims read rows.
func testFunnelMirrorsWhetherTheOriginSentValidators(t *testing.T, open Opener) {
	st := open(t, Options{Floor: store.NewMemFloor(0)})
	k := []byte(urlKey(8))
	check := func(step string, want bool) {
		t.Helper()
		if r, err := st.GetSchedule(k); err != nil || r.Checkable != want {
			t.Fatalf("%s: GetSchedule Checkable %v (%v), want %v", step, r.Checkable, err, want)
		}
		res, err := st.ScanDue(0, 1_000_000, 10)
		if err != nil || len(res.Rows) != 1 || res.Rows[0].Checkable != want {
			t.Fatalf("%s: ScanDue %+v (%v), want Checkable %v", step, res.Rows, err, want)
		}
		p, err := st.BeginPass(1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var seen []store.Row
		if err := p.IterateDue(0, 64, func(rows []store.DueRow) error {
			for _, r := range rows {
				seen = append(seen, r.Row)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 1 || seen[0].Checkable != want {
			t.Fatalf("%s: a pass read %+v, want Checkable %v", step, seen, want)
		}
	}
	withTarget := func(due int64, etag, lastModified string) store.Write {
		tg := sampleTarget()
		tg.Fresh.ETag, tg.Fresh.LastModified = etag, lastModified
		return store.Write{Schedule: mustSchedule(t, string(k), due, false, 0, store.Lanes{}), Target: &tg}
	}

	mustWrite(t, st, withTarget(100, "", ""))
	check("a target without validators", false)
	mustWrite(t, st, withTarget(200, `"v1"`, ""))
	check("a target with an ETag", true)
	mustWrite(t, st, put(t, string(k), 300))
	check("a write without a target after it", true)
	if _, err := st.Modify([]store.Change{{Key: k, MinDueMs: 400, Decide: func(cur store.Current) (store.Write, bool, error) {
		w, err := reschedule(k, 400, cur)
		return w, true, err
	}}}); err != nil {
		t.Fatal(err)
	}
	check("a change without a target", true)
	if _, err := st.Modify([]store.Change{{Key: k, MinDueMs: 500, Decide: func(cur store.Current) (store.Write, bool, error) {
		w, err := reschedule(k, 500, cur)
		tg := cur.Target
		tg.Fresh.ETag = ""
		w.Target = &tg
		return w, true, err
	}}}); err != nil {
		t.Fatal(err)
	}
	check("a change whose target lost its ETag", false)
	mustWrite(t, st, withTarget(600, "", "Tue, 01 Dec 2026 10:00:00 GMT"))
	check("a target with a Last-Modified only", true)
}
