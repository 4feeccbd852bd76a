package wire

import (
	"errors"
	"strings"
	"testing"
)

// An item nested deeper than maxItemDepth is rejected alone, by its index, and the items after
// it are read on, in an array and in NDJSON alike, whatever its brackets are past that depth or
// its strings hold. A bracket that does not match within the depth still stops the body.
func TestDeepItemIsRejectedAlone(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + `"]}"` + strings.Repeat("]", n) }
	for name, tc := range map[string]struct {
		body    string
		items   int
		bad     []int
		stopped int // -1: the body is read to its end
	}{
		"array":                 {`[{"url": "https://a.test/1"}, {"url": "https://a.test/2", "a": ` + deep(40) + `}, {"url": "https://a.test/3"}]`, 3, []int{1}, -1},
		"ndjson":                {"{\"url\": \"https://a.test/1\"}\n" + deep(33) + "\n{\"url\": \"https://a.test/3\"}\n", 3, []int{1}, -1},
		"at the bound":          {`[` + deep(31) + `, {"url": "https://a.test/2"}]`, 2, []int{0}, -1}, // JSON, not an object: refused by the decoder
		"mismatched past it":    {`[` + strings.Repeat("[", 40) + strings.Repeat("}", 8) + strings.Repeat("]", 32) + `, {"url": "https://a.test/2"}]`, 2, []int{0}, -1},
		"mismatched back at it": {`[` + strings.Repeat("[", 40) + strings.Repeat("}", 9) + strings.Repeat("]", 31) + `, {"url": "https://a.test/2"}]`, 0, nil, 0},
		"mismatched within it":  {`[{"url": "https://a.test/1"}, [[}}, {"url": "https://a.test/3"}]`, 1, nil, 1},
		"very deep":             {`[` + deep(100_000) + `, {"url": "https://a.test/2"}]`, 2, []int{0}, -1},
	} {
		var items int
		var bad []int
		err := DecodeTargetItems(strings.NewReader(tc.body), func(i int, item *TargetItem, err error) error {
			items++
			if err != nil {
				bad = append(bad, i)
			}
			return nil
		})
		var be *BodyError
		switch {
		case tc.stopped < 0 && err != nil:
			t.Errorf("%s: stopped: %v", name, err)
		case tc.stopped >= 0 && (!errors.As(err, &be) || be.Index != tc.stopped):
			t.Errorf("%s: %v, want the body stopped at item %d", name, err, tc.stopped)
		}
		if items != tc.items || len(bad) != len(tc.bad) || len(bad) > 0 && bad[0] != tc.bad[0] {
			t.Errorf("%s: %d items, rejected %v; want %d, rejected %v", name, items, bad, tc.items, tc.bad)
		}
	}
}
