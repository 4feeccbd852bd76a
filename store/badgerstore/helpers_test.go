package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store"
)

// openTest opens a store in a fresh temporary directory and closes it at the end of the test.
func openTest(t testing.TB, o *Options) *Store {
	t.Helper()
	st, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func mustSchedule(t testing.TB, key string, due int64, submitted bool, eff int64, lanes store.Lanes) store.Schedule {
	t.Helper()
	s, err := store.NewSchedule([]byte(key), due, submitted, eff, lanes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustWrite(t testing.TB, st *Store, ws ...store.Write) {
	t.Helper()
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
}

func mustVerify(t testing.TB, st *Store) store.IndexReport {
	t.Helper()
	rep, err := st.VerifyIndex()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("index and rows disagree: %+v", rep)
	}
	return rep
}

// rawSet writes bytes straight into Badger, bypassing the funnel: tests use it to plant
// corruption and loss. (The source-scan test allows it here because it reads only non-test
// files.)
// rawSet writes k behind the funnel's back. A planted schedule row is a row that exists, so its
// key goes into the key filter too (K1), as the next Open would put it.
func rawSet(t testing.TB, st *Store, k, v []byte) {
	t.Helper()
	if err := st.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
		t.Fatal(err)
	}
	if cacheKey, ok := bytes.CutPrefix(k, []byte(prefixSchedule)); ok {
		st.keys.Add(cacheKey)
	}
	st.publishView() // as a funnel commit does, so the Get methods read it
}

func rawDelete(t testing.TB, st *Store, keys ...[]byte) {
	t.Helper()
	err := st.db.Update(func(txn *badger.Txn) error {
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st.publishView()
}

func urlKey(i int) string {
	return fmt.Sprintf("desktop|https://www.example-shop.com/catalog/p/%08d", i)
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// sampleTarget is a target with every field set.
func sampleTarget() store.Target {
	return store.Target{
		URL: "https://example.com/a?b=c", Device: "mobile", Source: store.SourceDiscovered,
		StoredIntervalMs: 3_600_000, Route: "product", DemandRung: 2,
		Failures: store.Failures{Count: 3, LastClass: "timeout", FirstMs: 10, LastMs: 20},
		Terminal: store.TerminalSuppressed, TerminalRecheckMs: 99,
		LastRender: store.RenderSummary{Status: 200, AtMs: 1234, DurationMs: 800, Bytes: 4096},
	}
}
