package intake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/freshq/freshq/wire"
)

func landAll(t *testing.T, svc *Targets, items ...*wire.TargetItem) {
	t.Helper()
	var chunk []Item
	for _, it := range items {
		p, err := ParseItem(it, KeyingOf(svc.Settings()))
		if err != nil {
			t.Fatal(err)
		}
		chunk = append(chunk, p)
	}
	if _, err := svc.Upsert(chunk, func(i int, field, msg string) { t.Fatalf("item %d rejected: %s %s", i, field, msg) }); err != nil {
		t.Fatal(err)
	}
}

// listAll follows List's cursor to the end and returns every page it listed, as device|url.
func listAll(t *testing.T, svc *Targets, prefix, device string, limit int) (got []string, calls int) {
	t.Helper()
	after := ""
	for {
		l, err := svc.List(context.Background(), prefix, device, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if len(l.Pages) > limit {
			t.Fatalf("one answer of %d pages: over limit %d", len(l.Pages), limit)
		}
		for _, p := range l.Pages {
			got = append(got, p.Device+"|"+p.URL)
		}
		if l.Next == "" {
			return got, calls
		}
		if l.Next == after {
			t.Fatalf("the cursor did not move from %q", after)
		}
		after = l.Next
		if calls > 1000 {
			t.Fatal("List never ends")
		}
	}
}

// A prefix lists the targets under it, of one device or of every device, in key order, a
// page at a time: following the cursor lists each exactly once, and nothing outside the prefix.
func TestListPagesThroughAPrefix(t *testing.T) {
	_, svc := newTargets(t)
	var items []*wire.TargetItem
	var want []string
	for i := range 23 {
		u := fmt.Sprintf("https://a.test/c/%02d", i)
		items = append(items, &wire.TargetItem{URL: u}, &wire.TargetItem{URL: u, Device: "mobile"})
		want = append(want, "desktop|"+u)
	}
	for i := range 7 {
		want = append(want, fmt.Sprintf("mobile|https://a.test/c/%02d", i))
	}
	items = append(items, &wire.TargetItem{URL: "https://a.test/d/1"}, &wire.TargetItem{URL: "https://b.test/c/1"})
	landAll(t, svc, items...)
	want = want[:23]
	got, calls := listAll(t, svc, "https://a.test/c/", "desktop", 5)
	if !slices.Equal(got, want) || calls != 5 {
		t.Errorf("desktop under https://a.test/c/ in pages of 5: %d calls\n got %v\nwant %v", calls, got, want)
	}
	got, _ = listAll(t, svc, "HTTPS://A.TEST:443/c/", "", 4) // every device; the zero rules: case, default port
	if len(got) != 46 || !slices.IsSorted(got) || got[0] != "desktop|https://a.test/c/00" || got[45] != "mobile|https://a.test/c/22" {
		t.Errorf("every device: %d pages %v", len(got), got)
	}
	if l, err := svc.List(context.Background(), "https://a.test/zzz", "", "", 0); err != nil || len(l.Pages) != 0 || l.Next != "" {
		t.Errorf("a prefix of nothing: %+v %v", l, err)
	}
}

// A bad value is a FieldError naming its parameter.
func TestListBadValuesNameTheirField(t *testing.T) {
	_, svc := newTargets(t)
	for _, tc := range []struct {
		prefix, device, after string
		limit                 int
		field                 string
	}{
		{"", "", "", 0, "prefix"},
		{"::", "", "", 0, "prefix"},
		{"https://a.test/", "tv", "", 0, "device"},
		{"https://a.test/", "", "", 201, "limit"},
		{"https://a.test/", "", "", -1, "limit"},
		{"https://a.test/", "", "no-separator", 0, "after"},
		{"https://a.test/", "desktop", "mobile|https://a.test/", 0, "after"},
	} {
		var fe *FieldError
		if _, err := svc.List(context.Background(), tc.prefix, tc.device, tc.after, tc.limit); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a FieldError naming %s", tc, err, tc.field)
		}
	}
}
