//go:build testclock

package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/store/storetest"
	"github.com/freshq/freshq/testkit/pgtest"
)

// The suite's tests of protocol mutations (store.Mutations, compiled in only with the tag
// testclock): the F1 checker must find the rows they strand, on the plain store and on one
// that keeps the class index. make race runs them with the tag.
func TestMutations(t *testing.T) { storetest.RunMutations(t, openPG) }

func TestMutationsClassIndex(t *testing.T) { storetest.RunMutations(t, openPGClassified) }

// The defect of the system freshq replaces, the mutation store.Mutations.FloorOnWriter: a
// write executed by node A for a row of node B's shard lowers A's floor, not B's, and B's row
// is stranded below its shard's floor. Without the mutation, the row's own shard's floor is
// lowered.
func TestMutationFloorOnWriterStrandsRows(t *testing.T) {
	for _, onWriter := range []bool{false, true} {
		t.Run(fmt.Sprintf("floor_on_writer=%v", onWriter), func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			db := rawPool(t, dsn)
			ctx := context.Background()
			a := openStore(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a",
				TestSignals: store.TestSignals{Mutations: store.Mutations{FloorOnWriter: onWriter}}})
			const mine, theirs = int32(1), int32(9)
			if err := a.SetOwned(ctx, []int32{mine}, []int64{1}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(ctx, `UPDATE freshq_floor SET floor_ms = 10000`); err != nil {
				t.Fatal(err)
			}
			sch, _ := store.NewSchedule(keyIn(t, theirs, 0), 2_000, false, 60_000, store.Lanes{})
			if err := a.WriteSchedule(sch); err != nil {
				t.Fatal(err)
			}
			var below int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM freshq_schedule s JOIN freshq_floor f ON f.shard = s.shard
				WHERE s.due_at_ms < f.floor_ms`).Scan(&below); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 0, true: 1}[onWriter]; below != want {
				t.Fatalf("%d rows below their shard's floor, want %d", below, want)
			}
		})
	}
}
