package store

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestNewScheduleValidates(t *testing.T) {
	for _, c := range []struct {
		key  []byte
		due  int64
		eff  int64
		want error
	}{
		{nil, 1, 0, ErrEmptyKey},
		{[]byte(strings.Repeat("x", MaxKeyLen+1)), 1, 0, ErrKeyTooLong},
		{[]byte("k"), -1, 0, ErrNegativeDue},
		{[]byte("k"), 1, -1, ErrNegativeInterval},
	} {
		if _, err := NewSchedule(c.key, c.due, false, c.eff, Lanes{}); !isErr(err, c.want) {
			t.Errorf("NewSchedule(len %d, %d, %d): %v, want %v", len(c.key), c.due, c.eff, err, c.want)
		}
	}
	long := []byte(strings.Repeat("x", MaxKeyLen))
	s, err := NewSchedule(long, 0, true, 0, Lanes{})
	if err != nil {
		t.Fatalf("a key of exactly MaxKeyLen: %v", err)
	}
	long[0] = 'y'
	if s.Key()[0] != 'x' {
		t.Fatal("NewSchedule did not copy its key")
	}
	if s.DueAtMs() != 0 || !s.Submitted() || s.EffectiveIntervalMs() != 0 || s.Lanes() != (Lanes{}) {
		t.Fatalf("accessors: %+v", s)
	}
}

func TestFunnelRejectsUnsetSchedule(t *testing.T) {
	st := openTest(t, nil)
	if err := st.WriteSchedule(Schedule{}); !isErr(err, ErrScheduleUnset) {
		t.Fatalf("zero Schedule: %v", err)
	}
	ok := mustSchedule(t, "a", 1, false, 0, Lanes{})
	// One bad write refuses the whole call before anything is enqueued.
	if err := st.WriteSchedules([]Write{{Schedule: ok}, {}}); !isErr(err, ErrScheduleUnset) {
		t.Fatalf("call with a zero Schedule: %v", err)
	}
	bad := sampleTarget()
	bad.Source = 0
	if err := st.WriteSchedules([]Write{{Schedule: ok, Target: &bad}}); !isErr(err, ErrInvalidTarget) {
		t.Fatalf("invalid target: %v", err)
	}
	if err := st.WriteSchedules([]Write{{Schedule: ok, Page: &Page{Headers: []Header{{}}}}}); !isErr(err, ErrInvalidPage) {
		t.Fatalf("invalid page: %v", err)
	}
	if _, err := st.GetSchedule([]byte("a")); !isErr(err, ErrNotFound) {
		t.Fatalf("a refused call wrote something: %v", err)
	}
	if err := st.WriteSchedules(nil); err != nil {
		t.Fatalf("empty call: %v", err)
	}
}

func TestFunnelPutRescheduleDelete(t *testing.T) {
	st := openTest(t, nil)
	k := urlKey(1)
	mustWrite(t, st, Write{Schedule: mustSchedule(t, k, 1000, true, 3600, Lanes{NeverRendered: true})})
	r, err := st.GetSchedule([]byte(k))
	if err != nil || r.DueAtMs != 1000 || !r.Submitted || r.EffectiveIntervalMs != 3600 || !r.NeverRendered {
		t.Fatalf("after put: %+v %v", r, err)
	}
	mustVerify(t, st)

	// Reschedule: the old index entry goes, the new one comes, in one transaction.
	mustWrite(t, st, Write{Schedule: mustSchedule(t, k, 5000, false, 0, Lanes{})})
	res, err := st.ScanDue(0, 10_000, 10)
	if err != nil || len(res.Rows) != 1 || res.Rows[0].DueAtMs != 5000 || res.Rows[0].Submitted {
		t.Fatalf("after reschedule: %+v %v", res, err)
	}
	if rep := mustVerify(t, st); rep.Rows != 1 || rep.Entries != 1 {
		t.Fatalf("after reschedule: %+v", rep)
	}
	// Same due time, new projection: the entry's value changes in place.
	mustWrite(t, st, Write{Schedule: mustSchedule(t, k, 5000, true, 60, Lanes{Urgent: true})})
	res, _ = st.ScanDue(0, 10_000, 10)
	if len(res.Rows) != 1 || !res.Rows[0].Urgent || res.Rows[0].EffectiveIntervalMs != 60 {
		t.Fatalf("after in-place update: %+v", res)
	}
	mustVerify(t, st)

	if err := st.DeleteTarget([]byte(k)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSchedule([]byte(k)); !isErr(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if rep := mustVerify(t, st); rep.Rows != 0 || rep.Entries != 0 {
		t.Fatalf("after delete: %+v", rep)
	}
	if err := st.DeleteTarget([]byte(k)); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if err := st.DeleteTarget(nil); !isErr(err, ErrEmptyKey) {
		t.Fatalf("deleting an empty key: %v", err)
	}
}

func TestFunnelWriteCarriesTargetAndPage(t *testing.T) {
	st := openTest(t, nil)
	k := []byte(urlKey(7))
	tg, pg := sampleTarget(), samplePage()
	pg.Body = []byte(strings.Repeat("<p>body</p>", 400)) // above ValueThreshold: the value log
	mustWrite(t, st, Write{Schedule: mustSchedule(t, string(k), 100, false, 0, Lanes{}), Target: &tg, Page: &pg})
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
	mustWrite(t, st, Write{Schedule: mustSchedule(t, string(k), 200, false, 0, Lanes{})})
	res, _ := st.ScanDue(0, 1000, 10)
	if len(res.Rows) != 1 || res.Rows[0].StoredIntervalMs != tg.StoredIntervalMs {
		t.Fatalf("stored interval not carried over: %+v", res.Rows)
	}
	tg.StoredIntervalMs = 42
	mustWrite(t, st, Write{Schedule: mustSchedule(t, string(k), 200, false, 0, Lanes{}), Target: &tg})
	if r, _ := st.GetSchedule(k); r.StoredIntervalMs != 42 {
		t.Fatalf("stored interval not updated: %+v", r)
	}
	if err := st.DeleteTarget(k); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetTarget(k); !isErr(err, ErrNotFound) {
		t.Fatalf("target after delete: %v", err)
	}
	if _, err := st.GetPage(k); !isErr(err, ErrNotFound) {
		t.Fatalf("page after delete: %v", err)
	}
}

func TestFunnelSameKeyArrivalOrder(t *testing.T) {
	st := openTest(t, nil)
	var ws []Write
	for i := range 50 {
		ws = append(ws, Write{Schedule: mustSchedule(t, "k", int64(1000-i*7), i%2 == 0, int64(i), Lanes{})})
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

// A call far larger than one Badger transaction is cut into several; each write stays whole.
func TestFunnelSplitsLargeCalls(t *testing.T) {
	st := openTest(t, &Options{MemTableSize: 1 << 20}) // ~150 KB per transaction
	const n = 6000
	ws := make([]Write, 0, n)
	for i := range n {
		tg := sampleTarget()
		ws = append(ws, Write{Schedule: mustSchedule(t, urlKey(i%4000), int64(i), true, 1, Lanes{}), Target: &tg})
	}
	mustWrite(t, st, ws...)
	if rep := mustVerify(t, st); rep.Rows != 4000 || rep.Entries != 4000 {
		t.Fatalf("%+v", rep)
	}
	for i := 4000; i < n; i++ {
		if r, err := st.GetSchedule([]byte(urlKey(i % 4000))); err != nil || r.DueAtMs != int64(i) {
			t.Fatalf("key %d: %+v %v", i%4000, r, err)
		}
	}
}

// Group commit: concurrent callers are all acknowledged, and each finds its write.
func TestFunnelConcurrentWriters(t *testing.T) {
	var batches, writes int
	var mu sync.Mutex
	o := &Options{}
	st := openTest(t, o)
	st.opts.TestSignals.BeforeCommit = func() { mu.Lock(); batches++; mu.Unlock() }
	const writers, each = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := fmt.Sprintf("w%d|%d", w, i)
				s, _ := NewSchedule([]byte(k), int64(w*each+i), w%2 == 0, 0, Lanes{})
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
		}()
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

func TestFunnelCorruptRowIsReported(t *testing.T) {
	st := openTest(t, nil)
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "good", 1, false, 0, Lanes{})})
	rawSet(t, st, scheduleKey([]byte("bad")), []byte{0xde, 0xad})
	err := st.WriteSchedules([]Write{
		{Schedule: mustSchedule(t, "bad", 5, false, 0, Lanes{})},
		{Schedule: mustSchedule(t, "good", 6, false, 0, Lanes{})},
	})
	if !IsCorruptionError(err) {
		t.Fatalf("write over a corrupt row: %v", err)
	}
	// The other write of the call still committed, whole.
	if r, err := st.GetSchedule([]byte("good")); err != nil || r.DueAtMs != 6 {
		t.Fatalf("neighbour write: %+v %v", r, err)
	}
	if _, err := st.GetSchedule([]byte("bad")); !IsCorruptionError(err) {
		t.Fatalf("get of a corrupt row: %v", err)
	}
	if err := st.DeleteTarget([]byte("bad")); !IsCorruptionError(err) {
		t.Fatalf("delete of a corrupt row: %v", err)
	}
	rep, err := st.VerifyIndex()
	if err != nil || rep.Corrupt != 1 || rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestClosedStore(t *testing.T) {
	st, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s := mustSchedule(t, "k", 1, false, 0, Lanes{})
	if err := st.WriteSchedule(s); !isErr(err, ErrClosed) {
		t.Fatalf("write: %v", err)
	}
	if _, err := st.GetSchedule([]byte("k")); !isErr(err, ErrClosed) {
		t.Fatalf("get: %v", err)
	}
	if _, err := st.ScanDue(0, 1, 1); !isErr(err, ErrClosed) {
		t.Fatalf("scan: %v", err)
	}
	if _, err := st.BeginPass(1); !isErr(err, ErrClosed) {
		t.Fatalf("pass: %v", err)
	}
	if _, err := st.Reconcile(1); !isErr(err, ErrClosed) {
		t.Fatalf("reconcile: %v", err)
	}
	if _, err := st.RunGC(); !isErr(err, ErrClosed) {
		t.Fatalf("gc: %v", err)
	}
	if _, err := st.VerifyIndex(); !isErr(err, ErrClosed) {
		t.Fatalf("verify: %v", err)
	}
}

// Close drains: every call accepted before Close is committed and survives a reopen.
func TestCloseDrainsAndReopens(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	acked := make(chan string, 1000)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := fmt.Sprintf("w%d|%d", w, i)
				s, _ := NewSchedule([]byte(k), int64(i), false, 0, Lanes{})
				if err := st.WriteSchedule(s); err != nil {
					return // ErrClosed
				}
				acked <- k
				if i == 200 {
					return
				}
			}
		}()
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
	st, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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

// RefileIfUnchanged files only over the row it was given: not over a row written since, not
// over a deleted one; and a refused refile writes nothing at all.
func TestRefileIfUnchanged(t *testing.T) {
	st := openTest(t, nil)
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "k", 1_000, true, 6*3_600_000, Lanes{Failing: true})})
	was, err := st.GetSchedule([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	forward := mustSchedule(t, "k", 9_000, true, 24*3_600_000, Lanes{Failing: true})

	// Written since: refused, and the newer row stands.
	mustWrite(t, st, Write{Schedule: mustSchedule(t, "k", 5_000, true, 6*3_600_000, Lanes{})})
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
	if _, err := st.GetSchedule([]byte("k")); !isErr(err, ErrNotFound) {
		t.Fatalf("a refused refile resurrected the row: %v", err)
	}
	if rep, err := st.VerifyIndex(); err != nil || !rep.OK() {
		t.Fatalf("index: %+v %v", rep, err)
	}
	if _, err := st.RefileIfUnchanged(Schedule{}, was); !isErr(err, ErrScheduleUnset) {
		t.Fatalf("zero schedule: %v", err)
	}
}

// With RefuseImplausibleDue, the funnel refuses a due time before MinDueMs or after MaxDueMs
// on every write path, and writes nothing; without it, any non-negative due time is filed.
func TestFunnelRefusesImplausibleDue(t *testing.T) {
	st := openTest(t, &Options{RefuseImplausibleDue: true})
	for _, due := range []int64{0, MinDueMs - 1, MaxDueMs + 1} {
		sch := mustSchedule(t, "desktop|https://a.test/", due, false, 0, Lanes{})
		if err := st.WriteSchedules([]Write{{Schedule: sch}}); !isErr(err, ErrImplausibleDue) {
			t.Fatalf("due %d: %v", due, err)
		}
		if _, err := st.RefileIfUnchanged(sch, Row{}); !isErr(err, ErrImplausibleDue) {
			t.Fatalf("refile due %d: %v", due, err)
		}
		if _, err := st.refileIfAbsent([]Write{{Schedule: sch}}); !isErr(err, ErrImplausibleDue) {
			t.Fatalf("refile if absent due %d: %v", due, err)
		}
	}
	if _, err := st.GetSchedule([]byte("desktop|https://a.test/")); !isErr(err, ErrNotFound) {
		t.Fatalf("an implausible due time was filed: %v", err)
	}
	for _, due := range []int64{MinDueMs, MaxDueMs} {
		mustWrite(t, st, Write{Schedule: mustSchedule(t, "desktop|https://a.test/", due, false, 0, Lanes{})})
	}
	mustWrite(t, openTest(t, nil), Write{Schedule: mustSchedule(t, "desktop|https://a.test/", 0, false, 0, Lanes{})})
}
