package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// scanRow is a due row as the scan tests compare them.
type scanRow struct {
	key string
	due int64
}

// keysInShards returns n keys, the i-th of which lies in shards[i % len(shards)].
func keysInShards(n int, shards []int32, total int) []string {
	keys := make([]string, 0, n)
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("desktop|https://s.test/%d", i)
		if pgstore.Shard([]byte(k), total) == shards[len(keys)%len(shards)] {
			keys = append(keys, k)
		}
	}
	return keys
}

func writeDue(t *testing.T, st *pgstore.Store, rows []scanRow) {
	t.Helper()
	ws := make([]store.Write, 0, len(rows))
	for _, r := range rows {
		s, err := store.NewSchedule([]byte(r.key), r.due, false, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: s})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
}

// wantDue is the store's due rows up to now in (due, key) order, read by a plain query.
func wantDue(t *testing.T, dsn string, nowMs int64) []scanRow {
	t.Helper()
	rows, err := rawPool(t, dsn).Query(context.Background(),
		`SELECT cache_key, due_at_ms FROM freshq_schedule WHERE due_at_ms <= $1 ORDER BY due_at_ms, cache_key`, nowMs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []scanRow
	for rows.Next() {
		var key []byte
		var r scanRow
		if err := rows.Scan(&key, &r.due); err != nil {
			t.Fatal(err)
		}
		r.key = string(key)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scanAll pages through the due rows up to now as the claim path does: ScanDue from 0, then
// ScanDueAfter the last row, while the scan says it was capped. It checks each page's Capped.
func scanAll(t *testing.T, st *pgstore.Store, nowMs int64, limit int) []scanRow {
	t.Helper()
	var out []scanRow
	res, err := st.ScanDue(0, nowMs, limit)
	for {
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) > limit || res.Capped && len(res.Rows) != limit {
			t.Fatalf("limit %d: a page of %d rows, capped %v", limit, len(res.Rows), res.Capped)
		}
		for _, r := range res.Rows {
			out = append(out, scanRow{string(r.Key), r.DueAtMs})
		}
		if !res.Capped {
			return out
		}
		last := res.Rows[len(res.Rows)-1]
		res, err = st.ScanDueAfter(last.DueAtMs, last.Key, nowMs, limit)
	}
}

func sameRows(t *testing.T, what string, got, want []scanRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// The claim path's scan merges each shard's first few rows, and reads every shard's first
// limit + 1 again when one shard's were used up before the page was full. Its pages are the
// store's due rows in (due, key) order however the rows spread over the shards: over three
// shards (every first read too narrow), one row a shard in turn (never), and at random with
// ties of due time, for page sizes from 1 to more than the shards.
func TestScanDueMergesShardsExactly(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	st := openStore(t, dsn, nil)
	total := st.Shards()
	const nowMs = 1_000_000

	// One row a shard in turn, in due order: an even spread needs no second read.
	all := make([]int32, total)
	for i := range all {
		all[i] = int32(i)
	}
	var even []scanRow
	for i, k := range keysInShards(2*total, all, total) {
		even = append(even, scanRow{k, 10_000 + int64(i)})
	}
	writeDue(t, st, even)
	before := pgstore.ScanRereadsForTest(st)
	for _, limit := range []int{1, 64, total - 10} {
		res, err := st.ScanDue(0, nowMs, limit)
		if err != nil || len(res.Rows) != limit || !res.Capped {
			t.Fatalf("even spread, limit %d: %d rows, capped %v, %v", limit, len(res.Rows), res.Capped, err)
		}
		sameRows(t, fmt.Sprintf("even spread, limit %d", limit), scanAll(t, st, nowMs, limit), wantDue(t, dsn, nowMs))
	}
	if n := pgstore.ScanRereadsForTest(st) - before; n != 0 {
		t.Fatalf("an even spread needed %d second reads", n)
	}

	// Rows due earlier than all of those, in three shards only: each page's first read uses up
	// a shard before the page is full.
	var skewed []scanRow
	for i, k := range keysInShards(300, []int32{5, 9, 200}, total) {
		skewed = append(skewed, scanRow{k, 1_000 + int64(i)})
	}
	writeDue(t, st, skewed)
	before = pgstore.ScanRereadsForTest(st)
	for _, limit := range []int{1, 7, 64, 500} {
		sameRows(t, fmt.Sprintf("three shards, limit %d", limit), scanAll(t, st, nowMs, limit), wantDue(t, dsn, nowMs))
	}
	if pgstore.ScanRereadsForTest(st) == before {
		t.Fatal("rows in three shards never needed a second read: the test does not reach it")
	}

	// At random, with ties of due time broken by key, and rows due after now.
	rng := rand.New(rand.NewPCG(7, 11))
	var random []scanRow
	for i := range 3000 {
		random = append(random, scanRow{fmt.Sprintf("desktop|https://r.test/%d", i), 500 + rng.Int64N(2_000_000)})
	}
	writeDue(t, st, random)
	want := wantDue(t, dsn, nowMs)
	for _, limit := range []int{1, 3, 64, 257, 1000} {
		sameRows(t, fmt.Sprintf("random, limit %d", limit), scanAll(t, st, nowMs, limit), want)
	}
	res, err := st.ScanDue(0, nowMs, len(want)+1)
	if err != nil || res.Capped || !res.HasNextDue {
		t.Fatalf("a scan of every due row: capped %v, next due %v, %v", res.Capped, res.HasNextDue, err)
	}
	next := int64(-1)
	for _, r := range random {
		if r.due > nowMs && (next < 0 || r.due < next) {
			next = r.due
		}
	}
	if res.NextDueMs != next {
		t.Fatalf("next due %d, want %d", res.NextDueMs, next)
	}
}
