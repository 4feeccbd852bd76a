package storetest

import (
	"reflect"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
)

// A target's freshness state is kept by every backend: written with the target, seen by a
// Modify's Decide, and changed by it; a target written without it reads with none.
func testTargetKeepsFreshness(t *testing.T, open Opener) {
	st := open(t, Options{})
	plain := targetWrite(t, "plain", 1_000, 0)
	mustWrite(t, st, plain)
	if tg, err := st.GetTarget([]byte("plain")); err != nil || tg.Fresh != (store.Freshness{}) {
		t.Fatalf("a target written without freshness state reads %+v, %v", tg.Fresh, err)
	}

	fresh := store.Freshness{Changed: 2, ChangedHours: 1.5, UnchangedHours: 30, Requests: 4.25,
		RequestsAtMs: 5_000, Digest: 0xfeedface, DigestAtMs: 4_000, Served: 7, Conditional: 3,
		ETag: `"v1"`, LastModified: "Tue, 01 Dec 2026 10:00:00 GMT"}
	w := targetWrite(t, "k", 1_000, 0)
	w.Target.Fresh = fresh
	mustWrite(t, st, w)
	if tg, err := st.GetTarget([]byte("k")); err != nil || !reflect.DeepEqual(tg, *w.Target) {
		t.Fatalf("target read back %+v, %v; want %+v", tg, err, *w.Target)
	}

	var seen store.Freshness
	applied, err := st.Modify([]store.Change{{Key: []byte("k"), MinDueMs: 2_000, Decide: func(cur store.Current) (store.Write, bool, error) {
		seen = cur.Target.Fresh
		w, err := reschedule([]byte("k"), 2_000, cur)
		tg := cur.Target
		tg.Fresh.UnchangedHours += 1
		tg.Fresh.Conditional = 0
		tg.Fresh.ETag = ""
		w.Target = &tg
		return w, true, err
	}}})
	if err != nil || !slices.Equal(applied, []bool{true}) {
		t.Fatalf("applied %v, %v", applied, err)
	}
	if seen != fresh {
		t.Fatalf("Decide saw freshness %+v, want %+v", seen, fresh)
	}
	want := fresh
	want.UnchangedHours, want.Conditional, want.ETag = 31, 0, ""
	if tg, err := st.GetTarget([]byte("k")); err != nil || tg.Fresh != want {
		t.Fatalf("freshness after Modify %+v, %v; want %+v", tg.Fresh, err, want)
	}
	mustVerify(t, st)
}
