package fuzz

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// FuzzTargetsDecode feeds arbitrary bodies to POST /v1/targets' decoder and item validation:
// never a panic; every item either validates to a key within the store's limit, or is rejected
// naming a field (or, if it is not an object at all, with its decode error); and a body that
// is valid JSON is never stopped: whatever its items are (too long, nested too deep, not
// objects), each is handed over, to land or be rejected alone.
func FuzzTargetsDecode(f *testing.F) {
	full := `[{"url": "https://a.test/c/1", "device": "mobile", "interval": "6h", "source": "sitemap", "due": "2026-11-30T12:00:00Z"},` +
		`{"url": "ftp://x"}, {"url": "https://a.test/", "interval": -5}, {"url": "https://a.test/", "colour": 1}]`
	f.Add([]byte(full))
	for _, n := range []int{1, 10, len(full) / 2, len(full) - 1} {
		f.Add([]byte(full[:n])) // truncated mid-item, as a dropped connection leaves it
	}
	f.Add([]byte("{\"url\": \"https://a.test/x\"}\n{\"url\": \"https://a.test/y\", \"interval\": 3600}\n{\"url\""))
	f.Add([]byte("\n\n  \n"))
	f.Add([]byte(`[1, "two", null, {}]`))
	f.Add([]byte("{\n  \"url\": \"https://a.test/p\",\n  \"interval\": \"6h\"\n}\n"))                                     // pretty-printed: one item
	f.Add([]byte(`[{"url": "https://a.test/"}] trailing`))                                                                // after the closing bracket
	f.Add([]byte(`[{"url": "https://a.test/"}, {"url": "https://a.test/"]`))                                              // a bracket that does not match
	f.Add([]byte(`[{"url": "https://a.test/", "a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]`)) // too deep
	f.Add([]byte(`[{"url": "https://a.test/` + strings.Repeat("x", wire.MaxTargetItem) + `"}, {"url": "https://a.test/"}]`))
	f.Add([]byte(`[{"url": "https://a.test/1"}, {"url": "https://a.test/2", "a": [` + strings.Repeat(`{"b": [`, 20) + strings.Repeat("]}", 20) + `]}, {"url": "https://a.test/3"}]`))
	f.Add([]byte("{\"url\": \"https://a.test/1\"}\n" + strings.Repeat("[", 40) + `"]}"` + strings.Repeat("]", 40) + "\n{\"url\": \"https://a.test/2\"}\n"))
	keyRules, err := config.Default().KeyRules()
	if err != nil {
		f.Fatal(err)
	}
	devices := intake.Keying{Devices: map[string]bool{"desktop": true, "mobile": true}, Rules: keyRules}
	f.Fuzz(func(t *testing.T, body []byte) {
		items := 0
		err := wire.DecodeTargetItems(bytes.NewReader(body), func(i int, item *wire.TargetItem, err error) error {
			if i != items {
				t.Fatalf("item %d after %d items", i, items)
			}
			items++
			if i < 0 || items > len(body)+1 {
				t.Fatalf("item index %d after %d items of a %d-byte body", i, items, len(body))
			}
			if err != nil {
				if item != nil {
					t.Fatal("an item with a decode error")
				}
				return nil
			}
			key, field, verr := intake.ValidateTargetItem(item, devices)
			if verr != nil {
				if field == "" {
					t.Fatalf("rejected %+v without naming a field: %v", item, verr)
				}
				return nil
			}
			if len(key) == 0 || len(key) > store.MaxKeyLen || !bytes.Contains(key, []byte("|http")) {
				t.Fatalf("accepted %+v with key %q", item, key)
			}
			return nil
		})
		if err != nil && json.Valid(body) {
			t.Fatalf("a valid JSON body stopped after %d items: %v", items, err)
		}
		// A body that stops being readable names the first item it did not hand over.
		var bad *wire.BodyError
		if err != nil && (!errors.As(err, &bad) || bad.Index != items) {
			t.Fatalf("after %d items: %v", items, err)
		}
	})
}
