package claim

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// failingAfter is a store whose scan fails past its first page.
type failingAfter struct{ Scanner }

var errScan = errors.New("disk gone")

func (failingAfter) ScanDueAfter(int64, []byte, int64, int) (store.ScanResult, error) {
	return store.ScanResult{}, errScan
}

// A fallback scan that fails after it granted leases hands the granted jobs out with its error,
// through the Claimer too: a lease that reaches no caller would strand its row until its TTL.
func TestClaimFailingMidScanHandsOutWhatItLeased(t *testing.T) {
	n := newNode(t, routes+"queue:\n  ready: {enabled: false}\n")
	for i := range 300 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%03d", i), start-hour, true, 0, store.Lanes{})
	}
	// Every row of the first page (64 for a claim of 8) but the first three is leased by
	// someone else, so the claim pages on, and the second page fails.
	res, err := n.Store.ScanDue(0, n.Now(), 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rows[3:] {
		if _, st := n.Seg.Leases().Acquire(shm.KeyHash(r.Key), n.Now(), 600_000, 99); st != shm.Acquired {
			t.Fatal(st)
		}
	}
	n.index.Scanner = failingAfter{n.Store}
	jobs, err := n.claimer(1).ClaimFor(context.Background(), 8, 0, 7)
	if !errors.Is(err, errScan) || len(jobs) != 3 {
		t.Fatalf("%d jobs, %v: want the 3 leased, with the scan's error", len(jobs), err)
	}
	for _, j := range jobs {
		if err := n.Seg.Leases().Check(j.Lease, j.KeyHash, n.Now()); err != nil {
			t.Fatalf("a job handed out with the error is not held: %v", err)
		}
	}
	if got := n.Seg.Leases().CountHolder(7, n.Now()); got != 3 {
		t.Fatalf("holder 7 has %d leases, want the 3 handed out", got)
	}
}
