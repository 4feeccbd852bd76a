package pgcluster_test

import (
	"context"
	"slices"
	"testing"

	"github.com/freshq/freshq/store/pgstore"
	"github.com/freshq/freshq/testkit/pgtest"
)

// TestHostPauseBoard: a pause published by one node is read by another; a later pause of a
// host replaces an earlier one and an earlier never shortens it; a pause that has ended is not
// read. Times are the database's clock.
func TestHostPauseBoard(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	a := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-a"}, nil)
	b := openCluster(t, dsn, &pgstore.Options{Shards: clusterShards, Node: "node-b"}, nil)
	ctx := context.Background()
	_, _, _, now, err := b.ReadPauses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now == 0 { // no row: take the clock from a pause far ahead, read back
		if err := a.PublishPauses(ctx, []string{"clock.test"}, []int64{1 << 50}, []int32{429}); err != nil {
			t.Fatal(err)
		}
		_, _, _, now, _ = b.ReadPauses(ctx)
	}
	if err := a.PublishPauses(ctx, []string{"shop.test", "gone.test"}, []int64{now + 60_000, now - 1000}, []int32{429, 503}); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishPauses(ctx, []string{"shop.test"}, []int64{now + 5000}, []int32{503}); err != nil {
		t.Fatal(err)
	}
	hosts, until, status, _, err := b.ReadPauses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(hosts, "shop.test")
	if i < 0 || until[i] != now+60_000 || status[i] != 429 {
		t.Fatalf("read %v %v %v; want shop.test until %d, 429 (the later pause kept)", hosts, until, status, now+60_000)
	}
	if slices.Contains(hosts, "gone.test") {
		t.Fatalf("a pause that has ended was read: %v", hosts)
	}
	if err := b.PublishPauses(ctx, []string{"shop.test"}, []int64{now + 90_000}, []int32{503}); err != nil {
		t.Fatal(err)
	}
	hosts, until, status, _, _ = a.ReadPauses(ctx)
	if i := slices.Index(hosts, "shop.test"); i < 0 || until[i] != now+90_000 || status[i] != 503 {
		t.Fatalf("read %v %v %v; want shop.test until %d, 503 (a later pause replaces)", hosts, until, status, now+90_000)
	}
}
