package intake

import (
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// A key repeated within an upload's chunk is merged over its earlier item, in order, and
// counted as merged; a bad item is rejected by index with its field.
func TestUploadMergesRepeatsAndRejectsByField(t *testing.T) {
	e, svc := newTargets(t)
	up := svc.NewUpload()
	for i, it := range []wire.TargetItem{
		{URL: "https://shop.test/a", Interval: []byte(`"12h"`)},
		{URL: "https://shop.test/b", Device: "tv"},
		{URL: "https://shop.test/a", Source: "discovered", Due: "2027-01-01T00:00:00Z"},
	} {
		if err := up.Add(i, &it); err != nil {
			t.Fatal(err)
		}
	}
	if err := up.Flush(); err != nil {
		t.Fatal(err)
	}
	r := up.Resp
	if r.Accepted != 2 || r.Merged != 1 || r.Rejected != 1 || len(r.Errors) != 1 || r.Errors[0].Index != 1 || r.Errors[0].Field != "device" {
		t.Fatalf("%+v", r)
	}
	row, err := e.Store.GetSchedule([]byte("desktop|https://shop.test/a"))
	if err != nil || row.EffectiveIntervalMs != 12*hour || row.DueAtMs != 1798761600000 || row.Submitted {
		t.Fatalf("the repeat dropped the first item's fields: %+v %v", row, err)
	}
}

// A chunk the store fails lands nothing: its merges are taken back from the count, and
// FailedAt names its first item.
func TestUploadStoreFailureTakesBackTheChunk(t *testing.T) {
	_, svc := newTargets(t)
	svc.w = writerFunc(func([]store.Write) error { return errors.New("disk full") })
	up := svc.NewUpload()
	for i, u := range []string{"https://shop.test/a", "https://shop.test/a"} {
		up.Add(i+3, &wire.TargetItem{URL: u})
	}
	if err := up.Flush(); !errors.Is(err, ErrStore) {
		t.Fatalf("flush on a failing store: %v", err)
	}
	if up.Resp.Accepted != 0 || up.Resp.Merged != 0 || up.FailedAt() != 3 {
		t.Fatalf("%+v failed at %d", up.Resp, up.FailedAt())
	}
}
