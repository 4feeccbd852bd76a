package intake

import (
	"context"
	"fmt"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// countingStore counts the schedule rows the store hands out, by either of its iterations.
type countingStore struct {
	store.Store
	rows int
}

func (c *countingStore) ForEachSchedule(prefix []byte, fn func(key []byte, row store.Row) error) error {
	return c.Store.ForEachSchedule(prefix, func(key []byte, row store.Row) error {
		c.rows++
		return fn(key, row)
	})
}

func (c *countingStore) ListSchedule(ctx context.Context, prefix, after []byte, limit int) ([]store.KeyRow, error) {
	rows, err := c.Store.ListSchedule(ctx, prefix, after, limit)
	c.rows += len(rows)
	return rows, err
}

// A call of List reads one page of the store, wherever its cursor lies in the prefix: at most
// limit+1 schedule rows (the page and the one that says another follows), on the last page of
// a prefix of 300 pages as on the first, of one device or of every device.
func TestListReadsOnePageWhateverTheCursorDepth(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	counting := &countingStore{Store: e.Store}
	svc := mustTargets(t, TargetsDeps{Store: counting, Writer: e.Store, Deleter: e.Store, Locks: &KeyLocks{},
		Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	var items []*wire.TargetItem
	for i := range 300 {
		u := fmt.Sprintf("https://a.test/p/%04d", i)
		items = append(items, &wire.TargetItem{URL: u}, &wire.TargetItem{URL: u, Device: "mobile"})
	}
	items = append(items, &wire.TargetItem{URL: "https://a.test/q/1"}, &wire.TargetItem{URL: "https://b.test/p/1"})
	landAll(t, svc, items...)
	for _, tc := range []struct {
		device      string
		limit, want int
	}{{"desktop", 10, 300}, {"", 7, 600}, {"mobile", 1, 300}} {
		after, listed, worst, worstAt := "", 0, 0, 0
		for call := 0; ; call++ {
			counting.rows = 0
			l, err := svc.List(context.Background(), "https://a.test/p/", tc.device, after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if counting.rows > worst {
				worst, worstAt = counting.rows, listed
			}
			listed += len(l.Pages)
			if l.Next == "" || call > tc.want {
				break
			}
			after = l.Next
		}
		if listed != tc.want || worst > tc.limit+1 {
			t.Errorf("device %q in pages of %d: listed %d of %d; a call read up to %d rows (its cursor %d targets deep), want at most %d",
				tc.device, tc.limit, listed, tc.want, worst, worstAt, tc.limit+1)
		}
	}
}
