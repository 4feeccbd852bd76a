package keyspace

import (
	"bytes"
	"math"
	"testing"

	"github.com/freshq/freshq/store"
)

func TestDueKeyOrderAndDecode(t *testing.T) {
	dues := []int64{0, 1, 255, 256, 1 << 40, math.MaxInt64}
	var prev []byte
	for _, d := range dues {
		k := Due(d, []byte("k"))
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			t.Fatalf("due key of %d does not sort after its predecessor", d)
		}
		prev = k
		got, ck, err := DecodeDue(k)
		if err != nil || got != d || string(ck) != "k" {
			t.Fatalf("decode %x: %d %q %v", k, got, ck, err)
		}
	}
	for _, bad := range [][]byte{nil, []byte("d/"), []byte("s/12345678k"), Due(1, nil),
		append([]byte("d/\x80\x00\x00\x00\x00\x00\x00\x00"), 'k')} {
		if _, _, err := DecodeDue(bad); !store.IsCorruptionError(err) {
			t.Fatalf("DecodeDue(%q): %v, want corruption", bad, err)
		}
	}
}
