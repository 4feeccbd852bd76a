package intake

import (
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// upsert files items as one POST /v1/targets does, and returns how many landed; an item that
// does not parse or is rejected fails the test.
func upsert(t *testing.T, svc *Targets, items ...wire.TargetItem) int {
	t.Helper()
	chunk := make([]Item, len(items))
	for i := range items {
		p, err := ParseItem(&items[i], KeyingOf(svc.Settings()))
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		p.Index, chunk[i] = i, p
	}
	n, err := svc.Upsert(chunk, func(i int, field, msg string) { t.Errorf("item %d rejected: %s %s", i, field, msg) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUpsertKeepsWhatItOmits(t *testing.T) {
	e, svc := newTargets(t)
	upsert(t, svc, wire.TargetItem{URL: "https://shop.test/a", Interval: []byte(`"12h"`), Source: "sitemap", Due: "2027-01-01T00:00:00Z"})
	e.Advance(hour)
	if n := upsert(t, svc, wire.TargetItem{URL: "https://shop.test/a", Source: "sitemap"}); n != 1 {
		t.Fatalf("%d landed", n)
	}
	row, _ := e.Store.GetSchedule([]byte("desktop|https://shop.test/a"))
	if row.DueAtMs != 1798761600000 || row.EffectiveIntervalMs != 12*hour {
		t.Fatalf("re-import reset the row: %+v", row)
	}
}

// An omitted field keeps its stored value: source, interval and due, whatever set them.
func TestUpsertOmittedSourceKeepsStored(t *testing.T) {
	e, svc := newTargets(t)
	for _, src := range []string{"discovered", "sitemap"} {
		u := "https://shop.test/" + src
		upsert(t, svc, wire.TargetItem{URL: u, Source: src, Interval: []byte(`"6h"`)})
		if n := upsert(t, svc, wire.TargetItem{URL: u}); n != 1 {
			t.Fatalf("%d landed", n)
		}
		tg, _ := e.Store.GetTarget([]byte("desktop|" + u))
		row, _ := e.Store.GetSchedule([]byte("desktop|" + u))
		if tg.Source.String() != src || row.Submitted != (src == "sitemap") || tg.StoredIntervalMs != 6*hour {
			t.Fatalf("%s: an omitted source reset the target: %+v, row %+v", src, tg, row)
		}
	}
	// A new target without a source is an API target.
	upsert(t, svc, wire.TargetItem{URL: "https://shop.test/new"})
	if tg, _ := e.Store.GetTarget([]byte("desktop|https://shop.test/new")); tg.Source != store.SourceAPI {
		t.Fatalf("new target %+v", tg)
	}
}
