package dueorder

import (
	"bytes"
	"testing"

	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// A cursor seeks to its own key, or just past it with After (no other key lies between a key
// and the key with a 0x00 byte appended), and a cursor before 0 seeks from 0, since the index's
// unsigned order would put a negative due time after every other.
func TestCursorSeeks(t *testing.T) {
	k := []byte("desktop|https://a.test/")
	if got := (Cursor{Ms: 5, Key: k}).DueSeek(); !bytes.Equal(got, keyspace.Due(5, k)) {
		t.Fatalf("DueSeek at (5, k) = %q", got)
	}
	after := (Cursor{Ms: 5, Key: k, After: true}).DueSeek()
	if want := append(keyspace.Due(5, k), 0); !bytes.Equal(after, want) {
		t.Fatalf("DueSeek after (5, k) = %q, want %q", after, want)
	}
	if bytes.Compare(after, keyspace.Due(5, k)) <= 0 || bytes.Compare(after, keyspace.Due(5, append(k, 'x'))) >= 0 {
		t.Fatalf("DueSeek after (5, k) does not lie between k and its next extension")
	}
	if got := (Cursor{Ms: -1, Key: k, After: true}).DueSeek(); !bytes.Equal(got, keyspace.Due(0, nil)) {
		t.Fatalf("DueSeek of a negative cursor = %q, want the start of 0", got)
	}
	if got := (Cursor{Ms: 7, Key: k, After: true}).ClassSeek(3); !bytes.Equal(got, append(keyspace.Class(3, 7, k), 0)) {
		t.Fatalf("ClassSeek after (7, k) in class 3 = %q", got)
	}
	if got := (Cursor{Ms: -5}).ClassSeek(3); !bytes.Equal(got, keyspace.Class(3, 0, nil)) {
		t.Fatalf("ClassSeek of a negative cursor = %q, want class 3 from 0", got)
	}
}
