package wire

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeTargetItemsAtGivesOffsets pins the offset of each item, and of the break that stops
// a body, so that a reader of a file can name them by line.
func TestDecodeTargetItemsAtGivesOffsets(t *testing.T) {
	type got struct {
		off int64
		ok  bool
	}
	decode := func(body string) ([]got, error) {
		var out []got
		err := DecodeTargetItemsAt(strings.NewReader(body), func(i int, off int64, it *TargetItem, err error) error {
			if i != len(out) {
				t.Fatalf("item %d after %d items", i, len(out))
			}
			out = append(out, got{off, err == nil && it != nil})
			return nil
		})
		return out, err
	}

	body := "\n  {\"url\":\"https://a.test/1\"}\n7 {\n \"url\": \"https://a.test/2\"\n}\n" + `"x"`
	items, err := decode(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []got{{3, true}, {30, false}, {32, true}, {63, false}}
	if len(items) != len(want) {
		t.Fatalf("items %+v, want %+v", items, want)
	}
	for i, w := range want {
		if items[i] != w {
			t.Errorf("item %d: %+v, want %+v", i, items[i], w)
		}
	}
	for _, tc := range []struct {
		body  string
		index int
		off   int64
	}{
		{"{\"url\":\"https://a.test/1\"}\n{oops\n{\"url\":\"https://a.test/2\"}\n", 1, 27}, // where the unclosed item begins
		{`[{"url":"https://a.test/1"}] x`, 1, 29},                                          // garbage after ]
		{`[{"url":"https://a.test/1"} {"url":"https://a.test/2"}]`, 1, 28},                 // no comma: the byte that breaks it
		{"{\"url\":\"https://a.test/1\"}\n}\n", 1, 27},                                     // a bracket that matches nothing
	} {
		_, err := decode(tc.body)
		var bad *BodyError
		if !errors.As(err, &bad) || bad.Index != tc.index || bad.Offset != tc.off {
			t.Errorf("%q: %#v, want index %d at byte %d", tc.body, err, tc.index, tc.off)
		}
	}
}
