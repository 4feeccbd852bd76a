package badgerstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/store"
)

// checkK1 fails t if a key with a schedule row is missing from the key filter.
func checkK1(t *testing.T, st *Store, step int) {
	t.Helper()
	err := st.ForEachSchedule(nil, func(key []byte, _ store.Row) error {
		if !st.keys.MayHave(key) {
			return fmt.Errorf("row %q is not in the key filter", key)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("step %d: K1: %v", step, err)
	}
}

// checkH1 fails t if the host of a key with a schedule row is not among the stored hosts.
func checkH1(t *testing.T, st *Store, step int) {
	t.Helper()
	hosts, ok := st.keys.Hosts()
	if !ok {
		t.Fatalf("step %d: H1: a handful of hosts not listed", step)
	}
	err := st.ForEachSchedule(nil, func(key []byte, _ store.Row) error {
		if !slices.Contains(hosts, string(cachekey.Host(key))) {
			return fmt.Errorf("row %q: its host is not in %v", key, hosts)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("step %d: H1: %v", step, err)
	}
}

// TestKeyFilterK1 runs random funnel writes, deletes, conditional refiles and reopens over a
// small key space of five hosts and checks after every step that every key with a schedule row
// is in the key filter and its host in the stored hosts (H1, package keyfilter), and that the index
// still matches the rows (a filter that wrongly skipped a read would leave the old index entry
// behind).
func TestKeyFilterK1(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	r := rand.New(rand.NewPCG(5, 5))
	key := func() string { return fmt.Sprintf("desktop|https://k%d.test/%d", r.IntN(5), r.IntN(300)) }
	const steps = 400
	for step := range steps {
		switch n := r.IntN(10); {
		case n < 5: // a batch of puts, some of keys new to the store
			ws := make([]store.Write, 1+r.IntN(20))
			for i := range ws {
				ws[i] = store.Write{Schedule: mustSchedule(t, key(), r.Int64N(1000), r.IntN(2) == 0, 0, store.Lanes{})}
			}
			mustWrite(t, st, ws...)
		case n < 8:
			if err := st.DeleteTarget([]byte(key())); err != nil {
				t.Fatal(err)
			}
		case n < 9:
			k := key()
			was, err := st.GetSchedule([]byte(k))
			if err != nil {
				was = store.Row{DueAtMs: 1} // absent: the refile must not apply
			}
			if _, err := st.RefileIfUnchanged(mustSchedule(t, k, r.Int64N(1000), false, 0, store.Lanes{}), was); err != nil {
				t.Fatal(err)
			}
		default:
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if st, err = Open(dir, nil); err != nil {
				t.Fatal(err)
			}
		}
		checkK1(t, st, step)
		checkH1(t, st, step)
		if step%50 == 0 {
			mustVerify(t, st)
		}
	}
	if rep := mustVerify(t, st); rep.Rows == 0 {
		t.Fatalf("no rows after %d steps: the test exercised nothing", steps)
	}
}

// TestKeyFilterSkipsReadsOfNewKeysOnly: a load of keys new to the store skips the row read of
// (nearly) every key; rewriting the same keys, before or after a reopen, reads every one.
func TestKeyFilterSkipsReadsOfNewKeysOnly(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	const n = 2000
	load := func(due int64) {
		t.Helper()
		ws := make([]store.Write, n)
		for i := range ws {
			ws[i] = store.Write{Schedule: mustSchedule(t, fmt.Sprintf("desktop|https://new.test/%d", i), due, true, 0, store.Lanes{})}
		}
		mustWrite(t, st, ws...)
	}
	load(100)
	// The filter is sized for ≥ 2^20 keys at 1 % false positives; with 2,000 in it, a false
	// "may have" is far rarer than 1 in 100.
	if got := st.fn.ReadsSkipped(); got < n*99/100 {
		t.Fatalf("new keys: %d of %d reads skipped", got, n)
	}
	before := st.fn.ReadsSkipped()
	load(200)
	if got := st.fn.ReadsSkipped(); got != before {
		t.Fatalf("rewrite of existing keys skipped %d reads", got-before)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	load(300)
	if got := st.fn.ReadsSkipped(); got != 0 {
		t.Fatalf("rewrite after reopen skipped %d reads: the filter was not rebuilt from s/", got)
	}
	if rep := mustVerify(t, st); rep.Rows != n {
		t.Fatalf("%+v", rep)
	}
}
