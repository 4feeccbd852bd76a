package badgerstore_test

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/store/storetest"
)

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
	st := open(storetest.Classifier{})
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
	for _, c := range []store.Classifier{storetest.Classifier{}, storetest.OtherClassifier{}, nil, storetest.Classifier{}} {
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
