//go:build testclock

package storetest

import (
	"testing"

	"github.com/freshq/freshq/store"
)

// mutationTests are the suite's tests that run a store with a mutation of its protocol
// (store.Mutations) and must see the checker fail. The mutations exist only in a build with
// the tag testclock, so these tests do too: each backend runs them through RunMutations from a
// test file of that tag, and make race runs them (go test -tags testclock -run '^TestMutation').
var mutationTests = []test{
	{"NaiveFloorStrands", testNaiveFloorStrands},
	{"NaiveFloorStrandsRandomized", testNaiveFloorStrandsRandomized},
}

// RunMutations runs every test of a protocol mutation against the backend open opens, each as
// a subtest of t.
func RunMutations(t *testing.T, open Opener) {
	for _, tc := range mutationTests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// The naive protocol (store.Mutations.NaiveAdvance) strands a row, deterministically, and the
// checker catches it; the real protocol, same sequence, does not.
func testNaiveFloorStrands(t *testing.T, open Opener) {
	for _, naive := range []bool{true, false} {
		st := open(t, Options{Floor: store.NewMemFloor(0), TestSignals: store.TestSignals{Mutations: store.Mutations{NaiveAdvance: naive}}})
		fill(t, st, 5, 50_000, 10)
		p, _ := st.BeginPass(100_000)
		observed := map[string]int64{}
		_ = p.IterateDue(0, 8, func(rows []store.DueRow) error {
			for _, r := range rows {
				observed[string(r.Key)] = r.DueAtMs
			}
			return nil
		})
		// A write filed older than the guard commits after the pass's snapshot.
		mustWrite(t, st, put(t, "late", 10_000))
		p.AdvanceFloor(1000) // naive: floor := 50000 − 1000
		p.Close()
		bad := checkF1(t, st, observed, nil)
		switch {
		case naive && len(bad) != 1:
			t.Fatalf("naive protocol: checker found %v, want the row at 10000 stranded", bad)
		case naive:
			t.Logf("stranded as expected: %s", bad[0])
		case len(bad) != 0:
			t.Fatalf("real protocol stranded: %v", bad)
		}
	}
}

// Under the same random interleavings as testFloorInterleaving, the naive protocol strands
// rows: the checker is known to bite on this backend.
func testNaiveFloorStrandsRandomized(t *testing.T, open Opener) {
	c := Interleaving{Passes: 3000, Writers: 3, Keys: 8, Guard: 1000, Mutations: store.Mutations{NaiveAdvance: true}, StopAtFirst: true}
	bad, _ := c.Run(t, open, 1)
	if len(bad) == 0 {
		t.Fatal("the naive protocol stranded nothing in 3000 passes: the checker does not bite")
	}
	t.Logf("first strand: %s", bad[0])
}
