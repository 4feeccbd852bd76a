package sweep

import (
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
)

// A delete is a write like any other: a sweep whose snapshot still holds the row must learn
// that it changed, and not publish it.
func TestChangesTrackDeletes(t *testing.T) {
	e := newEnv(t, "", 1_800_000_000_000, shm.Options{})
	e.Put("desktop|https://a.test/c/1", e.Now()-qtest.Hour, true, 0, store.Lanes{})
	c := NewChanges()
	w := c.Wrap(e.Store)
	c.sweepBegin()
	if err := w.DeleteTarget([]byte("desktop|https://a.test/c/1")); err != nil {
		t.Fatal(err)
	}
	if !c.changedSince(shm.KeyHash([]byte("desktop|https://a.test/c/1"))) {
		t.Fatal("a delete during a sweep is not seen as a change")
	}
	c.sweepEnd()
}
