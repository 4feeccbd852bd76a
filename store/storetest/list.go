package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
)

// listKeys calls ListSchedule and returns its keys, checking that each row is the one stored
// under its key (due = dueOf[key]) and that no more than limit came back.
func listKeys(t *testing.T, st store.Store, prefix, after string, limit int, dueOf map[string]int64) []string {
	t.Helper()
	var a []byte
	if after != "" {
		a = []byte(after)
	}
	rows, err := st.ListSchedule(context.Background(), []byte(prefix), a, limit)
	if err != nil {
		t.Fatalf("ListSchedule(%q, after %q, %d): %v", prefix, after, limit, err)
	}
	if len(rows) > limit {
		t.Fatalf("ListSchedule(%q, after %q, %d): %d rows, over the limit", prefix, after, limit, len(rows))
	}
	keys := make([]string, 0, len(rows))
	for _, r := range rows {
		if want, ok := dueOf[string(r.Key)]; !ok || r.DueAtMs != want {
			t.Errorf("ListSchedule(%q): row %q due %d, stored %d (%v)", prefix, r.Key, r.DueAtMs, want, ok)
		}
		keys = append(keys, string(r.Key))
	}
	return keys
}

// ListSchedule pages through a prefix in key order: at most limit rows a call, strictly after
// the cursor (stored or not, below, inside or past the prefix's range), nothing outside the
// prefix on either side (its successor key included), and a prefix ending in 0xff bytes, or all
// 0xff, whose range has no successor or one that is not the prefix's last byte plus one.
func testListSchedule(t *testing.T, open Opener) {
	st := open(t, Options{})
	const p = "desktop|https://a.test/c/"
	inside := []string{p + "00", p + "01", p + "010", p + "02", p + "03", p + "04", p + "05", p + "06", p + "07", p + "08", p + "09", p + "10"}
	outside := []string{
		"desktop|https://a.test/c", // the prefix less its last byte
		"desktop|https://a.test/b/9",
		"desktop|https://a.test/c0", // the prefix's successor: the first key past its range
		"desktop|https://a.test/d/1",
		"mobile|https://a.test/c/00",
	}
	ffInside := []string{"k\xff", "k\xff\x00", "k\xff|a", "k\xff\xff", "k\xff\xff\xff|z"}
	ffOutside := []string{"k\xfe\xff", "l", "l\x00", "k"}
	allFF := []string{"\xff", "\xff|a", "\xff\xff", "\xff\xff|b"}
	dueOf := map[string]int64{}
	var ws []store.Write
	for i, k := range slices.Concat(inside, outside, ffInside, ffOutside, allFF, []string{"\xfe\xff|c"}) {
		dueOf[k] = 1000 + int64(i)
		ws = append(ws, put(t, k, dueOf[k]))
	}
	mustWrite(t, st, ws...)

	// Paging by the last key: order, the bound, after exclusive, the end of the prefix.
	var got []string
	after := ""
	for calls := 0; ; calls++ {
		page := listKeys(t, st, p, after, 5, dueOf)
		if calls > 3 {
			t.Fatalf("paging never ends: %q", got)
		}
		got = append(got, page...)
		if len(page) < 5 {
			if calls != 2 || len(page) != 2 {
				t.Errorf("call %d ended with %d rows, want call 2 with 2", calls, len(page))
			}
			break
		}
		after = page[len(page)-1]
	}
	if !slices.Equal(got, inside) {
		t.Fatalf("paged in 5s:\n got %q\nwant %q", got, inside)
	}
	if k := listKeys(t, st, p, p+"10", 5, dueOf); len(k) != 0 {
		t.Errorf("after the prefix's last key: %q", k)
	}
	for _, tc := range []struct {
		after string
		limit int
		want  []string
	}{
		{p + "05", 3, inside[7:10]},                 // a stored key: excluded
		{p + "01", 1, []string{p + "010"}},          // a stored key that is another's prefix
		{p + "055", 2, inside[7:9]},                 // between two keys
		{"desktop|https://a.test/b", 2, inside[:2]}, // below the prefix's range
		{p, 1, inside[:1]},                          // the prefix itself, not stored
		{"desktop|https://a.test/c/\xff", 5, nil},   // past every key of the prefix
		{"desktop|https://a.test/c0", 5, nil},       // the successor
		{"mobile|", 5, nil},                         // far past
		{"", 100, inside},                           // a limit above the rows
		{"", len(inside), inside},                   // exactly the rows
	} {
		if k := listKeys(t, st, p, tc.after, tc.limit, dueOf); !slices.Equal(k, tc.want) {
			t.Errorf("after %q limit %d:\n got %q\nwant %q", tc.after, tc.limit, k, tc.want)
		}
	}

	listPrefixesOfFF(t, st, ffInside, allFF, dueOf)

	// No prefix: every key, in order.
	all := slices.Sorted(func(yield func(string) bool) {
		for k := range dueOf {
			if !yield(k) {
				return
			}
		}
	})
	if k := listKeys(t, st, "", "", 1000, dueOf); !slices.Equal(k, all) {
		t.Errorf("no prefix:\n got %q\nwant %q", k, all)
	}
	if k := listKeys(t, st, "", "k\xff\xff\xff|z", 1000, dueOf); !slices.Equal(k, all[slices.Index(all, "k\xff\xff\xff|z")+1:]) {
		t.Errorf("no prefix, after a key: %q", k)
	}

	// A non-positive limit is refused; a missing prefix lists nothing.
	for _, limit := range []int{0, -1} {
		if rows, err := st.ListSchedule(context.Background(), []byte(p), nil, limit); !errors.Is(err, store.ErrInvalidArgument) || rows != nil {
			t.Errorf("limit %d: %d rows, %v", limit, len(rows), err)
		}
	}
	if k := listKeys(t, st, "desktop|https://none.test/", "", 5, dueOf); len(k) != 0 {
		t.Errorf("a prefix of nothing: %q", k)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if rows, err := st.ListSchedule(context.Background(), []byte(p), nil, 5); !errors.Is(err, store.ErrClosed) || rows != nil {
		t.Errorf("closed: %d rows, %v", len(rows), err)
	}
}

// listPrefixesOfFF pages through a prefix whose last byte is 0xff (its successor is "l", not
// "k\xff"+1) and through an all-0xff prefix, which has no successor: its range runs to the end
// of the key space.
func listPrefixesOfFF(t *testing.T, st store.Store, ffInside, allFF []string, dueOf map[string]int64) {
	t.Helper()
	var got []string
	after := ""
	for range len(ffInside) + 1 {
		page := listKeys(t, st, "k\xff", after, 2, dueOf)
		got = append(got, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1]
	}
	if !slices.Equal(got, ffInside) {
		t.Errorf("prefix k\\xff in 2s:\n got %q\nwant %q", got, ffInside)
	}
	if k := listKeys(t, st, "k\xff\xff", "k\xff\xff", 5, dueOf); !slices.Equal(k, ffInside[4:]) {
		t.Errorf("prefix k\\xff\\xff after itself: %q", k)
	}
	got = nil
	after = ""
	for range len(allFF) + 1 {
		page := listKeys(t, st, "\xff", after, 1, dueOf)
		got = append(got, page...)
		if len(page) < 1 {
			break
		}
		after = page[0]
	}
	if !slices.Equal(got, allFF) {
		t.Errorf("prefix \\xff one at a time:\n got %q\nwant %q", got, allFF)
	}
	if k := listKeys(t, st, "\xff\xff", "", 5, dueOf); !slices.Equal(k, allFF[2:]) {
		t.Errorf("prefix \\xff\\xff: %q", k)
	}
}
