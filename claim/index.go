package claim

import (
	"context"
	"fmt"
	"time"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Scanner is the floored index scan; *store.Store implements it.
type Scanner interface {
	ScanDue(floorMs, nowMs int64, limit int) (store.ScanResult, error)
	// ScanDueAfter continues a scan strictly after the row (afterMs, afterKey), in (due,
	// key) order (store.Store.ScanDueAfter).
	ScanDueAfter(afterMs int64, afterKey []byte, nowMs int64, limit int) (store.ScanResult, error)
	// HeadMs is where the scan starts: no row is due below it, and it is never below the
	// floor (store.Store.HeadMs).
	HeadMs() int64
}

// IndexSource is worker 0's Fallback: the floored index scan over its store, in due order (the
// order freshq replaces, which is what every failure of the ready path degrades to), leased in
// shared memory like any other grant.
type IndexSource struct {
	Scanner  Scanner
	Segment  *shm.Segment
	Policy   func() *policy.Policy // the policy in force: a job's cadence, lane and score
	Settings func() *Settings      // the lease and the hosts' limits, read once per scan
	Now      func() int64
	// Granted is Options.Granted for the grants of the index (the cluster's grant log).
	Granted func(key []byte, atNs int64)
	// Worker, if set, counts the rows the scan passed over for their host
	// (shm.CounterRenderRefusedHost).
	Worker *shm.Worker
}

// ClaimIndex grants up to req.N jobs from the index, scanning from the head (Scanner.HeadMs),
// leased for req.Holder for LeaseTTL(queue.lease_ttl, req.TTLMs). Rows being rendered stay in
// the index at their old due time until their result is written, so the scan pages past the
// leased ones: pages of a few times N, each starting strictly after the last row of the one
// before in (due, key) order, so a page of leased rows that all share one due time never hides
// the rows behind it. At most maxIndexPages pages are read; when they held only leased rows
// and more are due, it returns ErrQueuedBehindLeases. Its cost follows what it grants, not
// how many leases are live. A scan that fails after the first page returns the jobs it had
// leased with the error, never leases without a job.
//
// Each job also holds a slot of its host (hosts.Admit), taken before its lease: a row whose host
// is paused or at its limit is passed over, unleased. A scan that found nothing but such rows
// returns no job and no error, so that the claimer backs off as from an empty queue instead of
// rescanning at once: a host stays paused or full for longer than a claim's retry.
func (s *IndexSource) ClaimIndex(_ context.Context, req IndexClaim) ([]Job, error) {
	n := req.N
	if n <= 0 {
		return nil, nil
	}
	pol, set := s.Policy(), s.Settings()
	now := s.Now()
	leases, fence := s.Segment.Leases(), s.Segment.Fence()
	// The fence version before the scan: a shard given up after it fails every grant of the
	// scan's rows (see Claimer.takeReady), as a published entry of it would.
	fenceVersion := fence.Version()
	ttl := LeaseTTL(set.LeaseTTL.Milliseconds(), req.TTLMs)
	page := max(4*n, 64)
	// From the head rather than the floor: the guard window behind the first due row holds
	// the tombstones of every row rescheduled out of it, and the head is past them.
	res, err := s.Scanner.ScanDue(s.Scanner.HeadMs(), now, page)
	jobs := make([]Job, 0, n)
	hostsCfg := &set.Hosts
	leased, hostRefused := 0, 0
	defer func() {
		if s.Worker != nil && hostRefused > 0 {
			s.Worker.Add(shm.CounterRenderRefusedHost, uint64(hostRefused))
		}
	}()
	for pages := 1; ; pages++ {
		if err != nil {
			return jobs, fmt.Errorf("claim: scan: %w", err)
		}
		for i := range res.Rows {
			if len(jobs) == n {
				break
			}
			r := &res.Rows[i]
			h := shm.KeyHash(r.Key)
			token, ok := hosts.Admit(s.Segment, hostsCfg, r.Key, now, ttl, req.Holder)
			if !ok {
				hostRefused++
				continue
			}
			lease, st := leases.Acquire(h, now, ttl, req.Holder)
			if st != shm.Acquired {
				leases.Release(token, now, 0)
				leased++
				continue
			}
			var grantedNs int64
			if s.Granted != nil {
				grantedNs = time.Now().UnixNano()
			}
			if !fence.Allows(fenceVersion, s.Now()) {
				leases.Release(lease, now, 0)
				leases.Release(token, now, 0)
				return jobs, nil // every later row of the scan would be refused alike
			}
			if s.Granted != nil {
				s.Granted(r.Key, grantedNs)
			}
			cadence, _ := pol.Cadence(r)
			jobs = append(jobs, Job{
				Key: r.Key, KeyHash: h, DueAtMs: r.DueAtMs, CadenceMs: cadence, Submitted: r.Submitted, Checkable: r.Checkable,
				Lane: policy.LaneOf(r), Score: pol.Score(r, pol.RankInterval(r, cadence), now), Source: SourceIndex, Lease: lease,
				HostToken: token,
			})
		}
		if len(jobs) == n || !res.Capped || len(res.Rows) == 0 {
			return jobs, nil
		}
		if pages == maxIndexPages {
			if len(jobs) == 0 && leased > 0 {
				return nil, ErrQueuedBehindLeases
			}
			return jobs, nil
		}
		last := &res.Rows[len(res.Rows)-1]
		res, err = s.Scanner.ScanDueAfter(last.DueAtMs, last.Key, now, page)
	}
}

// maxIndexPages bounds one fallback claim's scan when nearly every due row is leased.
const maxIndexPages = 16
