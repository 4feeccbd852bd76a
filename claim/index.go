package claim

import (
	"context"
	"fmt"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Scanner is the floored index scan; *store.Store implements it.
type Scanner interface {
	ScanDue(floorMs, nowMs int64, limit int) (store.ScanResult, error)
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

// ClaimIndex grants up to n jobs from the index, scanning from the floor. Rows being rendered
// stay in the index at their old due time until their result is written, so the scan reads
// past at most the number of live leases to find n it can grant.
func (s *IndexSource) ClaimIndex(_ context.Context, n int, holder uint64) ([]Job, error) {
	if n <= 0 {
		return nil, nil
	}
	pol := s.Policy()
	now := s.Now()
	leases := s.Segment.Leases()
	limit := n + leases.Stats(now).Live
	res, err := s.Scanner.ScanDue(s.Segment.Floor().Load(), now, limit)
	if err != nil {
		return nil, fmt.Errorf("claim: scan: %w", err)
	}
	ttl := pol.Config().Queue.LeaseTTL.Ms()
	jobs := make([]Job, 0, n)
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
		pr := policy.Row{Key: r.Key, DueAtMs: r.DueAtMs, FromSitemap: r.FromSitemap,
			EffectiveIntervalMs: r.EffectiveIntervalMs, StoredIntervalMs: r.StoredIntervalMs,
			Urgent: r.Urgent, NeverRendered: r.NeverRendered, Failing: r.Failing}
		cadence, _ := pol.Cadence(&pr)
		jobs = append(jobs, Job{
			Key: r.Key, KeyHash: h, DueAtMs: r.DueAtMs, CadenceMs: cadence, FromSitemap: r.FromSitemap,
			Lane: policy.LaneOf(&pr), Score: pol.Score(&pr, cadence, now), Source: SourceIndex, Lease: lease,
		})
	}
	return jobs, nil
}
