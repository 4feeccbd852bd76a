package badgerstore_test

import (
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/store/storetest"
)

// badgerUnderTest is the Badger store with the suite's Backdoor.
type badgerUnderTest struct {
	*badgerstore.Store
	dir string
}

func (b badgerUnderTest) LoseRow(t testing.TB, cacheKey []byte) {
	badgerstore.LoseRowForTest(t, b.Store, cacheKey)
}

// Floors: the Badger store has one floor, the node's cell.
func (b badgerUnderTest) Floors(testing.TB) func([]byte) int64 {
	f := b.Floor().Load()
	return func([]byte) int64 { return f }
}

func openBadger(t testing.TB, o storetest.Options) store.Store {
	t.Helper()
	return openBadgerWith(t, o, nil)
}

func openBadgerClassified(t testing.TB, o storetest.Options) store.Store {
	t.Helper()
	return openBadgerWith(t, o, storetest.Classifier{})
}

func openBadgerWith(t testing.TB, o storetest.Options, c store.Classifier) store.Store {
	t.Helper()
	dir := t.TempDir()
	if o.Reopen != nil {
		dir = o.Reopen.(badgerUnderTest).dir
	}
	st, err := badgerstore.Open(dir, &badgerstore.Options{Floor: o.Floor, RefuseImplausibleDue: o.RefuseImplausibleDue, TestSignals: o.TestSignals, Classifier: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return badgerUnderTest{st, dir}
}

func TestConformance(t *testing.T) { storetest.Run(t, openBadger) }

// The suite again on a store that keeps the class index: every write keeps it, every check of
// the index (VerifyIndex) checks it, and the floor interleavings run sweeps that read it.
func TestConformanceClassIndex(t *testing.T) { storetest.Run(t, openBadgerClassified) }

// A naive head advance (the real floor advance, the head moved by plain store) strands a row
// below the head under the suite's random interleavings: the checker judges the head too.
// Badger only: the variant has no test signal.
func TestNaiveHeadAdvanceStrands(t *testing.T) {
	c := storetest.Interleaving{Passes: 3000, Writers: 3, Keys: 8, Guard: 1000,
		Advance: badgerstore.NaiveHeadAdvanceForTest, StopAtFirst: true}
	bad, _ := c.Run(t, openBadger, 1)
	if len(bad) == 0 {
		t.Fatal("a naive head advance stranded nothing in 3000 passes: the checker does not judge the head")
	}
	t.Logf("first strand below a naive head: %s", bad[0])
}
