package storetest

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
)

// Classifier is a store.Classifier for the suite's stores that keep a class index. It classes
// rows by their lane inputs and carried cadence, and by the last byte of the key, so that keys,
// lanes and cadences all move rows between classes.
type Classifier struct{}

// Class implements store.Classifier.
func (Classifier) Class(key []byte, p store.Projection) uint32 {
	c := uint32(p.Flags())<<24 | uint32(p.EffectiveIntervalMs/60_000)%977
	if i := bytes.IndexByte(key, '|'); i >= 0 && i+1 < len(key) {
		c |= uint32(key[len(key)-1]%3) << 16
	}
	return c
}

// Fingerprint implements store.Classifier.
func (Classifier) Fingerprint() uint64 { return 0x5eed }

// OtherClassifier classes rows otherwise than Classifier, under another fingerprint: a
// configuration change that moves rows between classes.
type OtherClassifier struct{}

// Class implements store.Classifier.
func (OtherClassifier) Class(key []byte, _ store.Projection) uint32 { return uint32(len(key)) % 5 }

// Fingerprint implements store.Classifier.
func (OtherClassifier) Fingerprint() uint64 { return 0xfeed }

// classPassOf returns p as a store.ClassPass over a class index, or skips t: a backend, or an
// Opener, without a class index has nothing to test here.
func classPassOf(t testing.TB, p store.Pass) store.ClassPass {
	t.Helper()
	cp, ok := p.(store.ClassPass)
	if !ok {
		t.Skip("the backend keeps no class index")
	}
	if _, ok := cp.ClassFingerprint(); !ok {
		t.Skip("the store was opened without a classifier")
	}
	return cp
}

// readClasses reads every due row of a class pass the way a sweep does: the class heads, then
// each class onwards in chunks of random size. It fails t if a class is not read in ascending
// (due, key) order or a row appears twice.
func readClasses(t testing.TB, cp store.ClassPass, rng *rand.Rand) map[string]store.Row {
	t.Helper()
	heads, err := cp.ClassHeads()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Row{}
	for i, h := range heads {
		if i > 0 && heads[i-1].Class >= h.Class {
			t.Fatalf("class heads out of order: %d after %d", h.Class, heads[i-1].Class)
		}
		last := h.DueRow
		got[string(last.Key)] = last.Row
		for more := true; more; {
			var rows []store.DueRow
			rows, more, err = cp.ReadClass(h.Class, last.DueAtMs, last.Key, 1+rng.IntN(5), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if c := cmp.Or(cmp.Compare(r.DueAtMs, last.DueAtMs), slices.Compare(r.Key, last.Key)); c <= 0 {
					t.Fatalf("class %d: %q due %d read after %q due %d", h.Class, r.Key, r.DueAtMs, last.Key, last.DueAtMs)
				}
				if _, dup := got[string(r.Key)]; dup {
					t.Fatalf("%q read twice", r.Key)
				}
				got[string(r.Key)] = r.Row
				last = r
			}
		}
	}
	return got
}

// The class index holds exactly the due index's rows: after puts, reschedules that change a
// row's due time, its cadence, its lane inputs or what it mirrors of its target, and deletes, a pass reading class by class
// reads the same due rows, with the same projections, as a pass reading the due index, and its
// head is their first.
func testClassIndexReadsTheDueSet(t *testing.T, open Opener) {
	st := open(t, Options{Floor: store.NewMemFloor(0)})
	rng := rand.New(rand.NewPCG(7, 7))
	cadences := []int64{0, 60_000, 3_600_000, 3_636_000, 86_400_000, 7 * 86_400_000}
	write := func(i int) {
		lanes := store.Lanes{Urgent: rng.IntN(8) == 0, NeverRendered: rng.IntN(4) == 0, Failing: rng.IntN(6) == 0}
		w := store.Write{Schedule: mustSchedule(t, urlKey(i), 1+rng.Int64N(20_000), rng.IntN(2) == 0,
			cadences[rng.IntN(len(cadences))], lanes)}
		if rng.IntN(3) == 0 { // a row that mirrors its target's validators (Checkable)
			tg := sampleTarget()
			tg.Fresh.ETag = `"e"`
			w.Target = &tg
		}
		mustWrite(t, st, w)
	}
	const n = 300
	for i := range n {
		write(i)
	}
	for range 200 {
		write(rng.IntN(n))
	}
	for range 30 {
		if err := st.DeleteTarget([]byte(urlKey(rng.IntN(n)))); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, st)

	const now = 15_000
	want := map[string]store.Row{}
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	err = p.IterateDue(0, 64, func(rows []store.DueRow) error {
		for _, r := range rows {
			want[string(r.Key)] = r.Row
		}
		return nil
	})
	p.Close()
	if err != nil {
		t.Fatal(err)
	}

	p2, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	cp := classPassOf(t, p2)
	first, ok, err := cp.ReadHead()
	if err != nil {
		t.Fatal(err)
	}
	got := readClasses(t, cp, rng)
	if !maps.Equal(got, want) {
		t.Fatalf("class index read %d due rows, due index %d; they differ: %s", len(got), len(want), diffRows(got, want))
	}
	minKey := ""
	for k, r := range want {
		if minKey == "" || r.DueAtMs < want[minKey].DueAtMs || r.DueAtMs == want[minKey].DueAtMs && k < minKey {
			minKey = k
		}
	}
	if !ok || string(first.Key) != minKey || first.Row != want[minKey] {
		t.Fatalf("head %q %+v (ok %v), want %q %+v", first.Key, first.Row, ok, minKey, want[minKey])
	}
	if st := cp.Stats(); !st.HasNextDue || st.NextDueMs <= now {
		t.Fatalf("next due %d (ok %v): want the first due time past %d", st.NextDueMs, st.HasNextDue, now)
	}
}

func diffRows(got, want map[string]store.Row) string {
	for k, r := range want {
		if g, ok := got[k]; !ok || g != r {
			return fmt.Sprintf("%q: class index %+v (found %v), due index %+v", k, g, ok, r)
		}
	}
	for k, r := range got {
		if _, ok := want[k]; !ok {
			return fmt.Sprintf("%q: only in the class index, %+v", k, r)
		}
	}
	return "?"
}
