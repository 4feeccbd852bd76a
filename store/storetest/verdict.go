package storetest

import (
	"reflect"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
)

// A target's verdict state is kept by every backend: written with the target (with and without
// freshness state), seen by a Modify's Decide, changed by it, and cleared by it; a target
// written without it reads with none.
func testTargetKeepsVerdict(t *testing.T, open Opener) {
	st := open(t, Options{})
	v := store.Verdict{HasGood: true, Good: store.Landmarks{TextLen: 2048, Title: true, H1: true, Description: true},
		GoodDigest: 0xabcdef, Reasons: 1 << 3, AtMs: 9_000, Agree: store.Agreement{Digest: 0x1234, Count: 2, FirstMs: 8_000, LastMs: 9_000}}
	w := targetWrite(t, "k", 1_000, 0)
	w.Target.Verdict = v
	fw := targetWrite(t, "f", 1_000, 0)
	fw.Target.Verdict = store.Verdict{Marked: true, Reasons: 1, AtMs: 3}
	fw.Target.Fresh = store.Freshness{Digest: 7, DigestAtMs: 3}
	mustWrite(t, st, w, fw, targetWrite(t, "plain", 1_000, 0))
	for _, want := range []store.Write{w, fw} {
		if tg, err := st.GetTarget(want.Schedule.Key()); err != nil || !reflect.DeepEqual(tg, *want.Target) {
			t.Fatalf("target read back %+v, %v; want %+v", tg, err, *want.Target)
		}
	}
	if tg, err := st.GetTarget([]byte("plain")); err != nil || !tg.Verdict.IsZero() {
		t.Fatalf("a target written without verdict state reads %+v, %v", tg.Verdict, err)
	}

	var seen store.Verdict
	applied, err := st.Modify([]store.Change{
		{Key: []byte("k"), MinDueMs: 2_000, Decide: func(cur store.Current) (store.Write, bool, error) {
			seen = cur.Target.Verdict
			w, err := reschedule([]byte("k"), 2_000, cur)
			tg := cur.Target
			tg.Verdict.Agree = store.Agreement{}
			tg.Verdict.Reasons, tg.Verdict.AtMs = 0, 10_000
			w.Target = &tg
			return w, true, err
		}},
		{Key: []byte("f"), MinDueMs: 2_000, Decide: func(cur store.Current) (store.Write, bool, error) {
			w, err := reschedule([]byte("f"), 2_000, cur)
			tg := cur.Target
			tg.Verdict = store.Verdict{}
			w.Target = &tg
			return w, true, err
		}},
	})
	if err != nil || !slices.Equal(applied, []bool{true, true}) {
		t.Fatalf("applied %v, %v", applied, err)
	}
	if seen != v {
		t.Fatalf("Decide saw verdict %+v, want %+v", seen, v)
	}
	want := v
	want.Agree, want.Reasons, want.AtMs = store.Agreement{}, 0, 10_000
	if tg, err := st.GetTarget([]byte("k")); err != nil || tg.Verdict != want {
		t.Fatalf("verdict after Modify %+v, %v; want %+v", tg.Verdict, err, want)
	}
	if tg, err := st.GetTarget([]byte("f")); err != nil || !tg.Verdict.IsZero() || tg.Fresh != fw.Target.Fresh {
		t.Fatalf("verdict cleared by Modify reads %+v (fresh %+v), %v", tg.Verdict, tg.Fresh, err)
	}
	mustVerify(t, st)
}
