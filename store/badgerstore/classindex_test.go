package badgerstore_test

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
)

// otherClassifier classes rows differently from testClassifier, under another fingerprint: a
// configuration change that moves rows between classes.
type otherClassifier struct{}

func (otherClassifier) Class(key []byte, p store.Projection) uint32 { return uint32(len(key)) % 5 }
func (otherClassifier) Fingerprint() uint64                         { return 0xfeed }

// The class index follows the classifier the store is opened with: rebuilt for another
// fingerprint, dropped without one, rebuilt again with one; every time VerifyIndex finds it
// agreeing with the rows under the classifier in force.
func TestClassIndexFollowsTheClassifier(t *testing.T) {
	dir := t.TempDir()
	open := func(c store.Classifier) *badgerstore.Store {
		t.Helper()
		st, err := badgerstore.Open(dir, &badgerstore.Options{Classifier: c})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(testClassifier{})
	const n = 200
	for i := range n {
		sch, err := store.NewSchedule(fmt.Appendf(nil, "desktop|https://a.test/%d", i), int64(1000+i), i%2 == 0, int64(i%7)*60_000, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteSchedule(sch); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []store.Classifier{testClassifier{}, otherClassifier{}, nil, testClassifier{}} {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		st = open(c)
		rep, err := st.VerifyIndex()
		if err != nil {
			t.Fatal(err)
		}
		want := n
		if c == nil {
			want = 0
		}
		if !rep.OK() || rep.Rows != n || rep.ClassEntries != want {
			t.Fatalf("classifier %T: %+v, want %d rows and %d class entries, all agreeing", c, rep, n, want)
		}
	}
	st.Close()
}
