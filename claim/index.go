package claim

import (
	"context"
	"fmt"

	"github.com/freshq/freshq/internal/rows"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Scanner is the floored index scan; *store.Store implements it.
type Scanner interface {
	ScanDue(floorMs, nowMs int64, limit int) (store.ScanResult, error)
	// HeadMs is where the scan starts: no row is due below it, and it is never below the
	// floor (store.Store.HeadMs).
	HeadMs() int64
}

// IndexSource is worker 0's Fallback: the floored index scan over its store, in due order (the
// order freshq replaces, which is what every failure of the ready path degrades to), leased in
// shared memory like any other grant.
type IndexSource struct {
	Scanner Scanner
	Segment *shm.Segment
	Policy  func() *policy.Policy
	Now     func() int64
}

// ClaimIndex grants up to n jobs from the index, scanning from the head (Scanner.HeadMs). Rows
// being rendered stay in the index at their old due time until their result is written, so
// the scan pages past the leased ones: pages of a few times n, each starting at the due time
// where the previous one stopped, until n are granted or the due rows run out. Its cost
// follows what it grants, not how many leases are live.
func (s *IndexSource) ClaimIndex(_ context.Context, n int, holder uint64) ([]Job, error) {
	if n <= 0 {
		return nil, nil
	}
	pol := s.Policy()
	now := s.Now()
	leases := s.Segment.Leases()
	ttl := pol.Config().Queue.LeaseTTL.Ms()
	page := max(4*n, 64)
	// From the head rather than the floor: the guard window behind the first due row holds
	// the tombstones of every row rescheduled out of it, and the head is past them.
	from := s.Scanner.HeadMs()
	jobs := make([]Job, 0, n)
	for pages := 0; len(jobs) < n && pages < maxIndexPages; pages++ {
		res, err := s.Scanner.ScanDue(from, now, page)
		if err != nil {
			return jobs, fmt.Errorf("claim: scan: %w", err)
		}
		for i := range res.Rows {
			if len(jobs) == n {
				break
			}
			r := &res.Rows[i]
			h := shm.KeyHash(r.Key)
			lease, st := leases.Acquire(h, now, ttl, holder)
			if st != shm.Acquired {
				continue
			}
			pr := rows.Policy(r.Key, r.Row)
			cadence, _ := pol.Cadence(&pr)
			jobs = append(jobs, Job{
				Key: r.Key, KeyHash: h, DueAtMs: r.DueAtMs, CadenceMs: cadence, FromSitemap: r.FromSitemap,
				Lane: policy.LaneOf(&pr), Score: pol.Score(&pr, cadence, now), Source: SourceIndex, Lease: lease,
			})
		}
		if !res.Capped || len(res.Rows) == 0 {
			break
		}
		last := res.Rows[len(res.Rows)-1].DueAtMs
		if last <= from {
			break // a whole page at one due time; the next page would repeat it
		}
		from = last // rows at exactly this time are read again; their leases refuse them
	}
	return jobs, nil
}

// maxIndexPages bounds one fallback claim's scan when nearly every due row is leased.
const maxIndexPages = 16
