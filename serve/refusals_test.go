package serve

import (
	"strings"
	"testing"

	"github.com/freshq/freshq/store"
)

// A URL whose key is over store.MaxKeyLen is a bad request naming url, never a 503 a crawler
// would retry for ever; the longest key the store holds is rendered on miss as any other.
func TestLongKeyIsABadRequest(t *testing.T) {
	n := newNode(t, baseYAML)
	prefix := "https://shop.test/p/long?x="
	long := prefix + strings.Repeat("a", store.MaxKeyLen+1-len("desktop|")-len(prefix))
	a := n.get("/" + long)
	if e := errorOf(t, a); a.code != 400 || e.Field != "url" || a.header.Get("Retry-After") != "" {
		t.Fatalf("a %d-byte key: %d %+v Retry-After %q", store.MaxKeyLen+1, a.code, e, a.header.Get("Retry-After"))
	}
	n.nothingWritten(t, "a long key")
}
