package badgerstore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
)

// The store lists the hosts it holds rows of: those written since Open, those found at the
// next Open, one host once however many of its rows; a deleted row's host stays until the
// store reopens (a superset, never less); and past store.MaxListedHosts it lists none.
func TestStoredHostsAreEveryRowsHost(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostsOf := func(st *Store) ([]string, bool) {
		t.Helper()
		p, err := st.BeginPass(0)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		return p.(store.HostLister).StoredHosts()
	}
	put := func(st *Store, keys ...string) {
		t.Helper()
		ws := make([]store.Write, len(keys))
		for i, k := range keys {
			sch, err := store.NewSchedule([]byte(k), 1_000, false, 0, store.Lanes{})
			if err != nil {
				t.Fatal(err)
			}
			ws[i] = store.Write{Schedule: sch}
		}
		if err := st.WriteSchedules(ws); err != nil {
			t.Fatal(err)
		}
	}
	if h, ok := hostsOf(st); !ok || len(h) != 0 {
		t.Fatalf("an empty store lists %v, %v", h, ok)
	}
	put(st, "desktop|https://b.test/1", "desktop|https://a.test/1", "mobile|https://b.test/2", "desktop|http://c.test:8080/x?y")
	want := []string{"a.test", "b.test", "c.test:8080"}
	if h, ok := hostsOf(st); !ok || !slices.Equal(h, want) {
		t.Fatalf("lists %v, %v; want %v", h, ok, want)
	}
	if err := st.DeleteTarget([]byte("desktop|https://a.test/1")); err != nil {
		t.Fatal(err)
	}
	if h, _ := hostsOf(st); !slices.Equal(h, want) {
		t.Fatalf("after a delete, lists %v; want %v until the store reopens", h, want)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	want = want[1:]
	if h, ok := hostsOf(st); !ok || !slices.Equal(h, want) {
		t.Fatalf("reopened, lists %v, %v; want %v", h, ok, want)
	}
	var many []string
	for i := range store.MaxListedHosts {
		many = append(many, fmt.Sprintf("desktop|https://h%d.test/", i))
	}
	put(st, many...)
	if h, ok := hostsOf(st); ok {
		t.Fatalf("%d hosts listed: %d", store.MaxListedHosts+2, len(h))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
