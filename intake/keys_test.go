package intake

import (
	"context"
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
)

// putKey files key with a schedule, a target, and a page rendered at pageAt (-1: no page).
func putKey(t *testing.T, st store.Store, key string, dueMs, pageAt int64) {
	t.Helper()
	sch, err := store.NewSchedule([]byte(key), dueMs, true, 3_600_000, store.Lanes{})
	if err != nil {
		t.Fatal(err)
	}
	w := store.Write{Schedule: sch, Target: &store.Target{URL: key[len("desktop|"):], Device: "desktop", Source: store.SourceAPI}}
	if pageAt >= 0 {
		w.Page = &store.Page{Status: 200, Body: []byte(key), RenderedAtMs: pageAt}
	}
	if err := st.WriteSchedules([]store.Write{w}); err != nil {
		t.Fatal(err)
	}
}

func pageBody(t *testing.T, st store.Store, key string) string {
	t.Helper()
	pg, err := st.GetPage([]byte(key))
	if err != nil {
		t.Fatalf("page of %s: %v", key, err)
	}
	return string(pg.Body)
}

// Keys filed under old rules are counted by CheckKeys and moved by MigrateKeys, in batches:
// schedule, target and page together; a new key already taken keeps the record with the newer
// page; a second migrate finds nothing; a key the rules leave alone is not touched.
func TestCheckAndMigrateKeys(t *testing.T) {
	e, svc := newTargets(t)
	e.Reload("keys:\n  drop_params: []\n")
	putKey(t, e.Store, "desktop|https://a.test/1?utm_source=n", 100, 50) // moves
	putKey(t, e.Store, "desktop|https://a.test/2?b=1&gclid=x", 200, -1)  // moves, no page
	putKey(t, e.Store, "desktop|https://a.test/3?utm_a=1", 300, 10)      // its new key has a newer page: kept
	putKey(t, e.Store, "desktop|https://a.test/3", 310, 20)              //
	putKey(t, e.Store, "desktop|https://a.test/4?fbclid=1", 400, 90)     // newer than its new key's page: replaces it
	putKey(t, e.Store, "desktop|https://a.test/4", 410, 30)              //
	putKey(t, e.Store, "desktop|https://a.test/5?a=1", 500, 5)           // unchanged
	putKey(t, e.Store, "desktop|https://a.test/6?_ga=1", 600, -1)        // moves
	ctx := context.Background()
	if c, err := svc.CheckKeys(ctx); err != nil || c.Changed != 0 {
		t.Fatalf("check under the rules the keys were filed with: %+v %v", c, err)
	}
	e.Reload("")
	c, err := svc.CheckKeys(ctx)
	if err != nil || c.Scanned != 8 || c.Changed != 5 || c.Unkeyable != 0 || len(c.Examples) != 5 {
		t.Fatalf("check under the default rules: %+v %v", c, err)
	}
	m, err := svc.MigrateKeys(ctx, 2)
	if err != nil || m.Done || m.Moved+m.Kept+m.Replaced != 2 {
		t.Fatalf("first batch of 2: %+v %v", m, err)
	}
	var total [3]int
	total[0], total[1], total[2] = m.Moved, m.Kept, m.Replaced
	for i := 0; !m.Done; i++ {
		if i == 10 {
			t.Fatal("migrate is not done after 10 more batches of 2")
		}
		if m, err = svc.MigrateKeys(ctx, 2); err != nil {
			t.Fatal(err)
		}
		total[0], total[1], total[2] = total[0]+m.Moved, total[1]+m.Kept, total[2]+m.Replaced
	}
	if total != [3]int{3, 1, 1} {
		t.Fatalf("moved, kept, replaced = %v, want [3 1 1]", total)
	}
	if c, err := svc.CheckKeys(ctx); err != nil || c.Changed != 0 || c.Scanned != 6 {
		t.Fatalf("check after migrate: %+v %v", c, err)
	}
	for _, gone := range []string{"desktop|https://a.test/1?utm_source=n", "desktop|https://a.test/3?utm_a=1", "desktop|https://a.test/4?fbclid=1"} {
		if _, err := e.Store.GetSchedule([]byte(gone)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s is still stored: %v", gone, err)
		}
	}
	row, err := e.Store.GetSchedule([]byte("desktop|https://a.test/1"))
	if err != nil || row.DueAtMs != 100 || !row.Submitted {
		t.Fatalf("moved row: %+v %v", row, err)
	}
	tgt, err := e.Store.GetTarget([]byte("desktop|https://a.test/1"))
	if err != nil || tgt.URL != "https://a.test/1" || tgt.StoredIntervalMs != 0 {
		t.Fatalf("moved target: %+v %v", tgt, err)
	}
	if got := pageBody(t, e.Store, "desktop|https://a.test/1"); got != "desktop|https://a.test/1?utm_source=n" {
		t.Fatalf("moved page: %q", got)
	}
	if got := pageBody(t, e.Store, "desktop|https://a.test/3"); got != "desktop|https://a.test/3" {
		t.Fatalf("kept page: %q, want the newer one already there", got)
	}
	if got := pageBody(t, e.Store, "desktop|https://a.test/4"); got != "desktop|https://a.test/4?fbclid=1" {
		t.Fatalf("replaced page: %q, want the newer one moved in", got)
	}
	if _, err := e.Store.GetPage([]byte("desktop|https://a.test/2?b=1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a key without a page got one: %v", err)
	}
	if got := pageBody(t, e.Store, "desktop|https://a.test/5?a=1"); got != "desktop|https://a.test/5?a=1" {
		t.Fatalf("unchanged key: %q", got)
	}
}

// A migrate interrupted between writing the new key and deleting the old leaves both, with the
// same page: the next migrate keeps the new key's copy and deletes the old.
func TestMigrateKeysAfterAnInterruptedMove(t *testing.T) {
	e, svc := newTargets(t)
	putKey(t, e.Store, "desktop|https://a.test/1?utm_source=n", 100, 50)
	putKey(t, e.Store, "desktop|https://a.test/1", 100, 50) // step 1 of its move, done
	m, err := svc.MigrateKeys(context.Background(), 0)
	if err != nil || !m.Done || m.Kept != 1 || m.Moved+m.Replaced != 0 {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := e.Store.GetSchedule([]byte("desktop|https://a.test/1?utm_source=n")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old key: %v", err)
	}
	if m, err := svc.MigrateKeys(context.Background(), 0); err != nil || m.Moved+m.Kept+m.Replaced != 0 || !m.Done {
		t.Fatalf("second migrate: %+v %v", m, err)
	}
}

func TestMigrateKeysLimitIsChecked(t *testing.T) {
	_, svc := newTargets(t)
	var fe *FieldError
	for _, l := range []int{-1, MigrateLimitMax + 1} {
		if _, err := svc.MigrateKeys(context.Background(), l); !errors.As(err, &fe) || fe.Field != "limit" {
			t.Errorf("limit %d: %v", l, err)
		}
	}
}
