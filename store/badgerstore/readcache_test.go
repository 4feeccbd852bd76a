package badgerstore

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/store"
)

// A value read is kept (the next read of the key costs no lookup), and a write of the key
// drops it before it is acknowledged: the next read returns what was written.
func TestReadCacheKeepsWhatIsReadAndDropsWhatIsWritten(t *testing.T) {
	st := openTest(t, nil)
	key := urlKey(1)
	page := func(body string) *store.Page {
		return &store.Page{Status: 200, Body: []byte(body), RenderedAtMs: 5}
	}
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 100, true, 1000, store.Lanes{}), Page: page("<p>one</p>")})
	if _, ok := st.rc.Get(pageKey([]byte(key))); ok {
		t.Fatal("a page is cached before anyone read it")
	}
	got, err := st.GetPage([]byte(key))
	if err != nil || string(got.Body) != "<p>one</p>" {
		t.Fatalf("%q %v", got.Body, err)
	}
	got.Body[1] = 'X' // the caller's copy: nothing of it reaches the cache
	if v, ok := st.rc.Get(pageKey([]byte(key))); !ok || !bytes.Contains(v, []byte("<p>one</p>")) {
		t.Fatalf("the page read is not cached as stored (%v)", ok)
	}
	if again, err := st.GetPage([]byte(key)); err != nil || string(again.Body) != "<p>one</p>" {
		t.Fatalf("read from the cache: %q %v", again.Body, err)
	}
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 200, true, 1000, store.Lanes{}), Page: page("<p>two</p>")})
	if v, ok := st.rc.Get(pageKey([]byte(key))); ok && !bytes.Contains(v, []byte("<p>two</p>")) {
		t.Fatal("the acknowledged write left the old page cached")
	}
	if got, err := st.GetPage([]byte(key)); err != nil || string(got.Body) != "<p>two</p>" {
		t.Fatalf("after the write: %q %v", got.Body, err)
	}
	if row, err := st.GetSchedule([]byte(key)); err != nil || row.DueAtMs != 200 {
		t.Fatalf("after the write: due %d %v", row.DueAtMs, err)
	}

	none := openTest(t, &Options{ReadCacheBytes: -1})
	mustWrite(t, none, store.Write{Schedule: mustSchedule(t, key, 100, true, 1000, store.Lanes{}), Page: page("<p>one</p>")})
	if got, err := none.GetPage([]byte(key)); err != nil || string(got.Body) != "<p>one</p>" || none.rc != nil {
		t.Fatalf("without a cache: %q %v (cache %v)", got.Body, err, none.rc != nil)
	}
}

// Readers racing a writer: a read that starts after a write was acknowledged never returns
// anything older, whatever fills the readers made meanwhile.
func TestReadCacheNeverOutlivesAWrite(t *testing.T) {
	st := openTest(t, &Options{ReadCacheBytes: 1 << 20})
	key := urlKey(7)
	write := func(n int) {
		mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, int64(1000+n), true, 1000, store.Lanes{}),
			Page: &store.Page{Status: 200, Body: []byte("v" + strconv.Itoa(n)), RenderedAtMs: int64(n)}})
	}
	write(0)
	var acked atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				want := acked.Load()
				pg, err := st.GetPage([]byte(key))
				if err == nil && pg.RenderedAtMs < want {
					err = fmt.Errorf("read page v%d after v%d was acknowledged", pg.RenderedAtMs, want)
				}
				if err == nil {
					var row store.Row
					if row, err = st.GetSchedule([]byte(key)); err == nil && row.DueAtMs < 1000+want {
						err = fmt.Errorf("read row due %d after %d was acknowledged", row.DueAtMs, 1000+want)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for n := 1; n <= 300; n++ {
		write(n)
		acked.Store(int64(n))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// GetPageShared returns what GetPage returns; on a hit its body is the cached value itself,
// which a later write replaces rather than changes: a page a caller holds stays as read.
func TestGetPageSharedIsTheCachedValue(t *testing.T) {
	st := openTest(t, nil)
	key := urlKey(3)
	write := func(body string) {
		mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 100, true, 1000, store.Lanes{}),
			Page: &store.Page{Status: 200, Headers: []store.Header{{Name: "content-type", Value: "text/html"}}, Body: []byte(body), RenderedAtMs: 5}})
	}
	write("<p>one</p>")
	first, err := st.GetPageShared([]byte(key)) // a miss: read from the view, then cached
	if err != nil || string(first.Body) != "<p>one</p>" {
		t.Fatalf("%q %v", first.Body, err)
	}
	held, err := st.GetPageShared([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	copied, _ := st.GetPage([]byte(key))
	if !reflect.DeepEqual(held, copied) {
		t.Fatalf("GetPageShared %+v, GetPage %+v", held, copied)
	}
	v, ok := st.rc.Get(pageKey([]byte(key)))
	if !ok || &held.Body[0] != &v[len(v)-len(held.Body)] {
		t.Fatal("a hit's body is not the cached value")
	}
	write("<p>two</p>")
	if got, err := st.GetPageShared([]byte(key)); err != nil || string(got.Body) != "<p>two</p>" {
		t.Fatalf("after the write: %q %v", got.Body, err)
	}
	if string(held.Body) != "<p>one</p>" {
		t.Fatalf("the page a caller held changed under it: %q", held.Body)
	}
}
