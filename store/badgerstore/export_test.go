package badgerstore

import (
	"testing"

	"github.com/freshq/freshq/store"
)

// This file exports to the store_test package (the conformance run of conformance_test.go)
// the few internals its Backdoor and the Badger-only protocol variant need.

// LoseRowForTest deletes cacheKey's schedule row and due-index entry behind the funnel's back,
// leaving its target and page.
func LoseRowForTest(t testing.TB, st *Store, cacheKey []byte) {
	t.Helper()
	r, err := st.GetSchedule(cacheKey)
	if err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{scheduleKey(cacheKey), dueKey(r.DueAtMs, cacheKey)}
	if c := st.opts.Classifier; c != nil {
		keys = append(keys, classKey(c.Class(cacheKey, r.Projection), r.DueAtMs, cacheKey))
	}
	rawDelete(t, st, keys...)
}

// NaiveHeadAdvanceForTest runs the real floor advance of p but moves the head naively: to
// min(firstDue, now) by plain store, with no in-flight term and no CAS.
func NaiveHeadAdvanceForTest(p store.Pass, guardMs int64) {
	bp := p.(*badgerPass)
	bp.AdvanceFloor(guardMs)
	s := bp.Stats()
	b := s.NowMs
	if s.HasFirstDue {
		b = min(b, s.FirstDueMs)
	}
	bp.s.floorMu.Lock()
	bp.s.setHead(b)
	bp.s.floorMu.Unlock()
}
