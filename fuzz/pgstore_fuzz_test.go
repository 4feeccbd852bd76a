package fuzz

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
)

// FuzzPGDueRow: a due row as PostgreSQL sends it is decoded or refused with ErrCorruption, never
// a panic; what decodes is a row the store could have written (due and intervals ≥ 0, flags it knows),
// and its projection's flags encode back to the byte that was sent, its rank interval to the
// one that was sent.
func FuzzPGDueRow(f *testing.F) {
	be := func(n int, v uint64) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, v)
		return b[8-n:]
	}
	f.Add([]byte("desktop|https://a.test/"), be(8, 1000), be(2, 5), be(8, 3600000), be(8, 0), be(8, 0))
	f.Add([]byte("desktop|https://a.test/"), be(8, 1000), be(2, 5), be(8, 3600000), be(8, 60000), be(8, 900000))
	f.Add([]byte("k"), be(8, 1), be(2, 0xff), be(8, 1), be(8, 1), be(8, 1))
	f.Add([]byte{}, be(4, 1), be(2, 1), be(8, 1<<63), be(8, 0), be(8, 0))
	f.Add([]byte("k"), be(8, 1), be(2, 1), be(8, 1), be(8, 1), be(8, 1<<63))
	f.Add([]byte("k"), be(8, 1), be(2, 1), be(8, 1), be(8, 1), be(4, 1))
	f.Fuzz(func(t *testing.T, key, due, flags, eff, stored, rank []byte) {
		k, row, err := pgstore.DecodeDueRow([][]byte{key, due, flags, eff, stored, rank})
		if err != nil {
			if !errors.Is(err, store.ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		if string(k) != string(key) {
			t.Fatalf("key %q, sent %q", k, key)
		}
		if row.EffectiveIntervalMs < 0 || row.StoredIntervalMs < 0 || row.RankIntervalMs < 0 {
			t.Fatalf("negative interval decoded: %+v", row)
		}
		if got := row.Flags(); uint16(got) != binary.BigEndian.Uint16(flags) {
			t.Fatalf("flags %#x encode back as %#x", flags, got)
		}
		if uint64(row.RankIntervalMs) != binary.BigEndian.Uint64(rank) {
			t.Fatalf("rank interval %d, sent %x", row.RankIntervalMs, rank)
		}
		if _, err := row.MarshalBinary(); err != nil {
			t.Fatalf("a decoded row the store cannot encode: %+v: %v", row, err)
		}
	})
}
