package badgerstore

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/store"
)

// A read never waits on a write: with a commit held inside Badger's write (its commit
// timestamp taken, its memtable write not done), GetPage and GetSchedule still answer, with
// the page committed before; once the write is let go, the writer's acknowledgement comes and
// its page reads back. Opening a Badger read transaction per read, as the store did, waits for
// the held commit and fails this test.
func TestReadsDoNotWaitOnACommit(t *testing.T) {
	var hold struct {
		sync.Mutex
		on      bool
		held    chan struct{}
		release chan struct{}
	}
	st := openTest(t, &Options{TestSignals: store.TestSignals{InBadgerWrite: func() {
		hold.Lock()
		on := hold.on
		hold.on = false
		hold.Unlock()
		if on {
			close(hold.held)
			<-hold.release
		}
	}}})
	key := urlKey(1)
	page := func(body string) *store.Page {
		return &store.Page{Status: 200, Headers: []store.Header{{Name: "content-type", Value: "text/html"}}, Body: []byte(body), RenderedAtMs: 5}
	}
	mustWrite(t, st, store.Write{Schedule: mustSchedule(t, key, 100, true, 1000, store.Lanes{}), Page: page("<p>one</p>")})

	hold.Lock()
	hold.on, hold.held, hold.release = true, make(chan struct{}), make(chan struct{})
	hold.Unlock()
	var letGo sync.Once
	release := func() { letGo.Do(func() { close(hold.release) }) }
	t.Cleanup(release) // before the store closes: Close drains the held write
	written := make(chan error, 1)
	go func() {
		written <- st.WriteSchedules([]store.Write{{Schedule: mustSchedule(t, key, 200, true, 1000, store.Lanes{}), Page: page("<p>two</p>")}})
	}()
	<-hold.held // the commit is inside Badger's write now, and stays there

	read := make(chan error, 1)
	var got store.Page
	var row store.Row
	go func() {
		var err error
		if got, err = st.GetPage([]byte(key)); err == nil {
			row, err = st.GetSchedule([]byte(key))
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a deadline for a read that waits forever, not a pause
		t.Fatal("a read waited on a commit held open")
	}
	if !bytes.Equal(got.Body, []byte("<p>one</p>")) || row.DueAtMs != 100 {
		t.Fatalf("while the write is held: body %q due %d, want the committed page and row", got.Body, row.DueAtMs)
	}
	select {
	case err := <-written:
		t.Fatalf("the write was acknowledged while Badger held it: %v", err)
	default:
	}

	release()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	got, err := st.GetPage([]byte(key))
	if err != nil || !bytes.Equal(got.Body, []byte("<p>two</p>")) {
		t.Fatalf("after the acknowledgement: %q, %v; want the page just written", got.Body, err)
	}
}
