package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// Every row carries shard = Shard(key, S), S being the default for a new schema; and
// VerifyIndex flags a row filed under another shard, which its shard's owner would never
// sweep.
func TestRowsCarryTheirShard(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	db := rawPool(t, dsn)
	st := openStore(t, dsn, nil)
	if st.Shards() != pgstore.DefaultShards {
		t.Fatalf("shards %d, want the default %d", st.Shards(), pgstore.DefaultShards)
	}
	var ws []store.Write
	for i := range 500 {
		s, _ := store.NewSchedule(fmt.Appendf(nil, "desktop|https://a.test/%d", i), int64(i), false, 0, store.Lanes{})
		ws = append(ws, store.Write{Schedule: s})
	}
	if err := st.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rows, err := db.Query(ctx, `SELECT cache_key, shard FROM freshq_schedule`)
	if err != nil {
		t.Fatal(err)
	}
	used := map[int32]bool{}
	n := 0
	for rows.Next() {
		var key []byte
		var shard int32
		if err := rows.Scan(&key, &shard); err != nil {
			t.Fatal(err)
		}
		if want := pgstore.Shard(key, st.Shards()); shard != want {
			t.Fatalf("%s: shard %d, want %d", key, shard, want)
		}
		used[shard] = true
		n++
	}
	if rows.Err() != nil || n != 500 || len(used) < pgstore.DefaultShards/2 {
		t.Fatalf("%d rows over %d shards: %v", n, len(used), rows.Err())
	}
	if rep, err := st.VerifyIndex(); err != nil || !rep.OK() || rep.Rows != 500 {
		t.Fatalf("verify: %+v %v", rep, err)
	}

	moved := "desktop|https://a.test/7"
	if _, err := db.Exec(ctx, `UPDATE freshq_schedule SET shard = (shard + 1) % $2 WHERE cache_key = $1`, []byte(moved), st.Shards()); err != nil {
		t.Fatal(err)
	}
	rep, err := st.VerifyIndex()
	if err != nil || rep.OK() || rep.RowsWithoutEntry != 1 || !slices.Equal(rep.Examples, []string{moved}) {
		t.Fatalf("a row under the wrong shard: %+v %v", rep, err)
	}
}

// Shard is a pure function of the key and S: the same on every node and every run.
func TestShardIsStable(t *testing.T) {
	for _, c := range []struct {
		key    string
		shards int
	}{{"a", 1}, {"desktop|https://a.test/", 256}, {"mobile|https://b.test/x?y=1", 7}} {
		s := pgstore.Shard([]byte(c.key), c.shards)
		if s < 0 || int(s) >= c.shards || s != pgstore.Shard([]byte(c.key), c.shards) {
			t.Fatalf("Shard(%q, %d) = %d", c.key, c.shards, s)
		}
	}
}
