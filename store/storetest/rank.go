package storetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/freshq/freshq/store"
)

// rankedSchedule is mustSchedule with a rank interval.
func rankedSchedule(t testing.TB, key string, due, eff, rank int64, lanes store.Lanes) store.Schedule {
	t.Helper()
	s, err := mustSchedule(t, key, due, true, eff, lanes).WithRankInterval(rank)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readEveryPath reads the rows of want through every read the contract has (the row get, the
// prefix walk, both scans, a pass's IterateDue, the class pass's head and classes when the
// store keeps a class index, and the Current a Modify decides on), and fails t where any of
// them gives a row other than want's. Every row of want must be due at nowMs.
func readEveryPath(t *testing.T, st store.Store, nowMs int64, want map[string]store.Row) {
	t.Helper()
	check := func(path string, got map[string]store.Row) {
		t.Helper()
		if !maps.Equal(got, want) {
			t.Fatalf("%s: %s", path, diffRowSets(got, want))
		}
	}

	got := map[string]store.Row{}
	for k := range want {
		r, err := st.GetSchedule([]byte(k))
		if err != nil {
			t.Fatalf("GetSchedule %q: %v", k, err)
		}
		got[k] = r
	}
	check("GetSchedule", got)

	got = map[string]store.Row{}
	if err := st.ForEachSchedule(nil, func(key []byte, r store.Row) error {
		got[string(key)] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("ForEachSchedule", got)

	res, err := st.ScanDue(0, nowMs, 100)
	if err != nil {
		t.Fatal(err)
	}
	check("ScanDue", dueRowSet(res.Rows))
	res, err = st.ScanDueAfter(0, nil, nowMs, 100)
	if err != nil {
		t.Fatal(err)
	}
	check("ScanDueAfter", dueRowSet(res.Rows))

	p, err := st.BeginPass(nowMs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got = map[string]store.Row{}
	if err := p.IterateDue(0, 2, func(rows []store.DueRow) error {
		maps.Copy(got, dueRowSet(rows))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("IterateDue", got)

	p2, err := st.BeginPass(nowMs)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if cp, ok := p2.(store.ClassPass); ok {
		if _, ok := cp.ClassFingerprint(); ok {
			first, ok, err := cp.ReadHead()
			if err != nil || !ok {
				t.Fatalf("ReadHead: ok %v, %v", ok, err)
			}
			if first.Row != want[string(first.Key)] {
				t.Fatalf("ReadHead: %q %+v, want %+v", first.Key, first.Row, want[string(first.Key)])
			}
			check("ClassHeads and ReadClass", readClasses(t, cp, rand.New(rand.NewPCG(1, 2))))
		}
	}

	got = map[string]store.Row{}
	for k := range want {
		applied, err := st.Modify([]store.Change{{Key: []byte(k), Decide: func(cur store.Current) (store.Write, bool, error) {
			got[k] = cur.Row
			return store.Write{}, false, nil // read only: nothing is filed
		}}})
		if err != nil || len(applied) != 1 || applied[0] {
			t.Fatalf("Modify %q: applied %v, %v", k, applied, err)
		}
	}
	check("Modify's Current", got)
}

func dueRowSet(rows []store.DueRow) map[string]store.Row {
	m := make(map[string]store.Row, len(rows))
	for _, r := range rows {
		m[string(r.Key)] = r.Row
	}
	return m
}

func diffRowSets(got, want map[string]store.Row) string {
	for k, r := range want {
		if g, ok := got[k]; !ok || g != r {
			return fmt.Sprintf("%q: read %+v (found %v), want %+v", k, g, ok, r)
		}
	}
	return fmt.Sprintf("read %d rows, want %d", len(got), len(want))
}

// A row's rank interval reads back exactly on every read path; it belongs to the write that
// filed it: a later write of the same key without one (a put, a refile) reads back 0, while
// the stored interval is still carried over; and a row without one gains one in place, its due
// time unchanged.
func testRankIntervalReadsBack(t *testing.T, open Opener) {
	st := open(t, Options{Floor: store.NewMemFloor(0)})
	tg := sampleTarget()
	lanes := store.Lanes{Urgent: true}
	mustWrite(t, st,
		store.Write{Schedule: rankedSchedule(t, "rank|a", 1_000, 60_000, 900_000, lanes), Target: &tg},
		store.Write{Schedule: rankedSchedule(t, "rank|b", 2_000, 0, 1, store.Lanes{})},
		store.Write{Schedule: mustSchedule(t, "rank|c", 3_000, false, 3_600_000, store.Lanes{Failing: true})},
	)
	want := map[string]store.Row{
		"rank|a": {DueAtMs: 1_000, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 60_000,
			StoredIntervalMs: tg.StoredIntervalMs, RankIntervalMs: 900_000, Lanes: lanes}},
		"rank|b": {DueAtMs: 2_000, Projection: store.Projection{Submitted: true, RankIntervalMs: 1}},
		"rank|c": {DueAtMs: 3_000, Projection: store.Projection{EffectiveIntervalMs: 3_600_000,
			Lanes: store.Lanes{Failing: true}}},
	}
	const now = 10_000
	readEveryPath(t, st, now, want)
	mustVerify(t, st)

	// A refile compares the whole row, rank interval included, and files the schedule's own.
	if filed, err := st.RefileIfUnchanged(mustSchedule(t, "rank|b", 2_500, true, 0, store.Lanes{}), want["rank|b"]); err != nil || !filed {
		t.Fatalf("refile over the ranked row as read: filed %v, %v", filed, err)
	}
	want["rank|b"] = store.Row{DueAtMs: 2_500, Projection: store.Projection{Submitted: true}}
	stale := want["rank|b"]
	stale.RankIntervalMs = 7
	if filed, err := st.RefileIfUnchanged(rankedSchedule(t, "rank|b", 2_600, 0, 7, store.Lanes{}), stale); err != nil || filed {
		t.Fatalf("refile over a row that differs only in its rank interval: filed %v, %v", filed, err)
	}

	// A write without a rank interval: 0, never the replaced row's; the stored interval is
	// still the target's, carried over.
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "rank|a", 4_000, true, 60_000, lanes)})
	want["rank|a"] = store.Row{DueAtMs: 4_000, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 60_000,
		StoredIntervalMs: tg.StoredIntervalMs, Lanes: lanes}}
	// A row gains one at its own due time: the due-index entry is rewritten in place.
	mustWrite(t, st, store.Write{Schedule: rankedSchedule(t, "rank|c", 3_000, 3_600_000, 5, store.Lanes{Failing: true})})
	want["rank|c"] = store.Row{DueAtMs: 3_000, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 3_600_000,
		RankIntervalMs: 5, Lanes: store.Lanes{Failing: true}}}
	readEveryPath(t, st, now, want)
	mustVerify(t, st)

	// And loses it at its own due time.
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, "rank|c", 3_000, true, 3_600_000, store.Lanes{Failing: true})})
	want["rank|c"] = store.Row{DueAtMs: 3_000, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 3_600_000,
		Lanes: store.Lanes{Failing: true}}}
	readEveryPath(t, st, now, want)
	mustVerify(t, st)
}
