package storetest

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/freshq/freshq/store"
)

// Decide runs on the funnel's goroutine, where t.Fatal must not be called: the helpers below
// return errors instead, and a Decide may run more than once (a backend may rebuild its
// transaction), so the tests record the last call.

func reschedule(key []byte, due int64, cur store.Current) (store.Write, error) {
	s, err := store.NewSchedule(key, due, cur.Row.Submitted, cur.Row.EffectiveIntervalMs, cur.Row.Lanes)
	return store.Write{Schedule: s}, err
}

// bump is a Change that adds one to key's target's failure count, keeping its row's due time.
func bump(key []byte) store.Change {
	return store.Change{Key: key, Decide: func(cur store.Current) (store.Write, bool, error) {
		w, err := reschedule(key, cur.Row.DueAtMs, cur)
		tg := cur.Target
		tg.Failures.Count++
		w.Target = &tg
		return w, true, err
	}}
}

func targetWrite(t testing.TB, key string, due int64, count uint32) store.Write {
	t.Helper()
	tg := sampleTarget()
	tg.Failures.Count = count
	return store.Write{Schedule: mustSchedule(t, key, due, true, 60, store.Lanes{Urgent: true}), Target: &tg}
}

func testModifyDecidesOnCurrent(t *testing.T, open Opener) {
	st := open(t, Options{})
	w := targetWrite(t, "k", 1_000, 3)
	mustWrite(t, st, w)
	wantRow, err := st.GetSchedule([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	var seen store.Current
	applied, err := st.Modify([]store.Change{{Key: []byte("k"), MinDueMs: 2_000, Decide: func(cur store.Current) (store.Write, bool, error) {
		seen = cur
		w, err := reschedule([]byte("k"), cur.Row.DueAtMs+1_000, cur)
		tg := cur.Target
		tg.DemandRung++
		w.Target = &tg
		return w, true, err
	}}})
	if err != nil || !slices.Equal(applied, []bool{true}) {
		t.Fatalf("applied %v, %v", applied, err)
	}
	if !seen.HasRow || seen.Row != wantRow || !seen.HasTarget || !reflect.DeepEqual(seen.Target, *w.Target) {
		t.Fatalf("Decide saw %+v, want row %+v and target %+v", seen, wantRow, *w.Target)
	}
	if r, err := st.GetSchedule([]byte("k")); err != nil || r.DueAtMs != 2_000 || !r.Submitted || !r.Urgent || r.EffectiveIntervalMs != 60 {
		t.Fatalf("row after Modify: %+v %v", r, err)
	}
	if tg, err := st.GetTarget([]byte("k")); err != nil || tg.DemandRung != w.Target.DemandRung+1 {
		t.Fatalf("target after Modify: %+v %v", tg, err)
	}
	mustVerify(t, st)
}

func testModifyNotOKWritesNothing(t *testing.T, open Opener) {
	st := open(t, Options{})
	mustWrite(t, st, targetWrite(t, "k", 1_000, 3))
	before, _ := st.GetSchedule([]byte("k"))
	skip := store.Change{Key: []byte("k"), Decide: func(cur store.Current) (store.Write, bool, error) {
		w, err := reschedule([]byte("k"), 9_000, cur)
		return w, false, err // decided, then declined: nothing is filed
	}}
	file := store.Change{Key: []byte("j"), Decide: func(cur store.Current) (store.Write, bool, error) {
		w, err := reschedule([]byte("j"), 2_000, cur)
		return w, true, err
	}}
	applied, err := st.Modify([]store.Change{skip, file})
	if err != nil || !slices.Equal(applied, []bool{false, true}) {
		t.Fatalf("applied %v, %v", applied, err)
	}
	if r, _ := st.GetSchedule([]byte("k")); r != before {
		t.Fatalf("a declined change wrote the row: %+v, was %+v", r, before)
	}
	if tg, _ := st.GetTarget([]byte("k")); tg.Failures.Count != 3 {
		t.Fatalf("a declined change wrote the target: %+v", tg)
	}
	mustVerify(t, st)
}

func testModifyMissingRow(t *testing.T, open Opener) {
	st := open(t, Options{})
	var seen []store.Current
	record := store.Change{Key: []byte("new"), MinDueMs: 500, Decide: func(cur store.Current) (store.Write, bool, error) {
		seen = append(seen, cur)
		w, err := reschedule([]byte("new"), 500, cur)
		tg := sampleTarget()
		w.Target = &tg
		return w, true, err
	}}
	if applied, err := st.Modify([]store.Change{record}); err != nil || !applied[0] {
		t.Fatalf("applied %v, %v", applied, err)
	}
	if cur := seen[len(seen)-1]; cur.HasRow || cur.HasTarget || cur != (store.Current{}) {
		t.Fatalf("a key never written was seen as %+v", cur)
	}
	if r, err := st.GetSchedule([]byte("new")); err != nil || r.DueAtMs != 500 {
		t.Fatalf("row filed by Modify: %+v %v", r, err)
	}
	if err := st.DeleteTarget([]byte("new")); err != nil {
		t.Fatal(err)
	}
	seen = nil
	if applied, err := st.Modify([]store.Change{record}); err != nil || !applied[0] {
		t.Fatalf("after delete: applied %v, %v", applied, err)
	}
	if cur := seen[len(seen)-1]; cur.HasRow || cur.HasTarget {
		t.Fatalf("a deleted key was seen as %+v", cur)
	}
	mustVerify(t, st)
}

func testModifyRefusesBadDecision(t *testing.T, open Opener) {
	st := open(t, Options{})
	mustWrite(t, st, targetWrite(t, "k", 5_000, 3))
	before, _ := st.GetSchedule([]byte("k"))
	decideFailed := errors.New("decide failed")
	for _, c := range []struct {
		name   string
		change store.Change
		want   error
	}{
		{"another key", store.Change{Key: []byte("k"), Decide: func(cur store.Current) (store.Write, bool, error) {
			w, err := reschedule([]byte("other"), 6_000, cur)
			return w, true, err
		}}, store.ErrInvalidArgument},
		{"due before MinDueMs", store.Change{Key: []byte("k"), MinDueMs: 4_000, Decide: func(cur store.Current) (store.Write, bool, error) {
			w, err := reschedule([]byte("k"), 3_999, cur)
			return w, true, err
		}}, store.ErrInvalidArgument},
		{"unset schedule", store.Change{Key: []byte("k"), Decide: func(store.Current) (store.Write, bool, error) {
			return store.Write{}, true, nil
		}}, store.ErrScheduleUnset},
		{"Decide's error", store.Change{Key: []byte("k"), Decide: func(store.Current) (store.Write, bool, error) {
			return store.Write{}, false, decideFailed
		}}, decideFailed},
		{"no Decide", store.Change{Key: []byte("k")}, store.ErrInvalidArgument},
		{"negative MinDueMs", store.Change{Key: []byte("k"), MinDueMs: -1, Decide: bump([]byte("k")).Decide}, store.ErrNegativeDue},
		{"empty key", store.Change{Decide: bump([]byte("k")).Decide}, store.ErrEmptyKey},
	} {
		applied, err := st.Modify([]store.Change{c.change})
		if !isErr(err, c.want) || slices.Contains(applied, true) {
			t.Errorf("%s: applied %v, %v; want %v", c.name, applied, err, c.want)
		}
	}
	if r, _ := st.GetSchedule([]byte("k")); r != before {
		t.Fatalf("a refused change wrote the row: %+v, was %+v", r, before)
	}
	if _, err := st.GetSchedule([]byte("other")); !isErr(err, store.ErrNotFound) {
		t.Fatalf("a change of k filed a row of another key: %v", err)
	}
	mustVerify(t, st)
}

// Two changes of one key in one call are decided in order, each on the state the one before
// it left; two calls gathered into one batch lose neither.
func testModifySameKeyInOneCall(t *testing.T, open Opener) {
	var hold Hook
	st := open(t, Options{TestSignals: store.TestSignals{BeforeCommit: hold.Run}})
	mustWrite(t, st, targetWrite(t, "k", 1_000, 0))
	var seen [2]store.Current
	step := func(i int, due int64) store.Change {
		return store.Change{Key: []byte("k"), Decide: func(cur store.Current) (store.Write, bool, error) {
			seen[i] = cur
			w, err := reschedule([]byte("k"), due, cur)
			tg := cur.Target
			tg.Failures.Count++
			w.Target = &tg
			return w, true, err
		}}
	}
	applied, err := st.Modify([]store.Change{step(0, 2_000), step(1, 3_000)})
	if err != nil || !slices.Equal(applied, []bool{true, true}) {
		t.Fatalf("applied %v, %v", applied, err)
	}
	if seen[0].Row.DueAtMs != 1_000 || seen[0].Target.Failures.Count != 0 ||
		seen[1].Row.DueAtMs != 2_000 || seen[1].Target.Failures.Count != 1 {
		t.Fatalf("the second change did not see the first: %+v then %+v", seen[0], seen[1])
	}
	r, _ := st.GetSchedule([]byte("k"))
	tg, _ := st.GetTarget([]byte("k"))
	if r.DueAtMs != 3_000 || tg.Failures.Count != 2 {
		t.Fatalf("after two changes: row %+v, count %d", r, tg.Failures.Count)
	}

	// Hold the committer on a write of another key while two calls queue behind it.
	held, release := make(chan struct{}), make(chan struct{})
	hold.Set(func() { hold.Set(nil); close(held); <-release })
	errs := make(chan error, 3)
	go func() { errs <- st.WriteSchedule(mustSchedule(t, "other", 1, false, 0, store.Lanes{})) }()
	<-held
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, err := st.Modify([]store.Change{bump([]byte("k"))}); errs <- err })
	}
	close(release)
	wg.Wait()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if tg, _ := st.GetTarget([]byte("k")); tg.Failures.Count != 4 {
		t.Fatalf("count %d after two more changes, want 4", tg.Failures.Count)
	}
}

// Modify concurrent with WriteSchedules of the same key loses no update: every Modify's
// increment of the target lands, and no Modify files a row older than a write acknowledged
// before it committed, so the last write's due time stands.
func testModifyConcurrentWithWrites(t *testing.T, open Opener) {
	st := open(t, Options{})
	key := []byte("k")
	mustWrite(t, st, targetWrite(t, "k", 1, 0))
	const writes, modifiers, each = 200, 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, modifiers+1)
	wg.Go(func() {
		for v := int64(1); v <= writes; v++ {
			s, _ := store.NewSchedule(key, 10*v, false, 0, store.Lanes{})
			if err := st.WriteSchedule(s); err != nil {
				errs <- err
				return
			}
		}
	})
	for range modifiers {
		wg.Go(func() {
			for range each {
				if applied, err := st.Modify([]store.Change{bump(key)}); err != nil || !applied[0] {
					errs <- errors.Join(err, errors.New("a change was not filed"))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, _ := st.GetSchedule(key)
	tg, _ := st.GetTarget(key)
	if tg.Failures.Count != modifiers*each || r.DueAtMs != 10*writes {
		t.Fatalf("count %d (want %d), due %d (want %d): an update was lost", tg.Failures.Count, modifiers*each, r.DueAtMs, 10*writes)
	}
	mustVerify(t, st)
}
