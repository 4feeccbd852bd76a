package leases

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// WireJob converts a granted job for the wire.
func WireJob(j claim.Job) wire.Job {
	w := wire.Job{Key: j.Key, KeyHash: j.KeyHash, DueAtMs: j.DueAtMs, CadenceMs: j.CadenceMs, Submitted: j.Submitted,
		Lane: uint8(j.Lane), Score: j.Score, Source: j.Source.String(), Lease: intake.WireLease(j.Lease), Checkable: j.Checkable}
	if j.HostToken.State != 0 {
		t := intake.WireLease(j.HostToken)
		w.HostToken = &t
	}
	return w
}

// ClaimJob converts a wire job back: what a render worker claimed through worker 0.
func ClaimJob(j wire.Job) claim.Job {
	src := claim.SourceIndex
	if j.Source == claim.SourceReady.String() {
		src = claim.SourceReady
	}
	c := claim.Job{Key: j.Key, KeyHash: j.KeyHash, DueAtMs: j.DueAtMs, CadenceMs: j.CadenceMs, Submitted: j.Submitted,
		Lane: policy.Lane(j.Lane), Score: j.Score, Source: src, Lease: intake.ShmLease(j.Lease), Checkable: j.Checkable}
	if j.HostToken != nil {
		c.HostToken = intake.ShmLease(*j.HostToken)
	}
	return c
}

// ClaimIndex answers a render worker's claim from worker 0's floored index scan: req.N of
// 1..10000 and a TTL not negative, or a *intake.FieldError naming "n" or "ttl_ms". When the due rows
// are all queued behind leases the answer says so, with no jobs. A scan that failed before it
// leased anything is an error matching intake.ErrStore; one that failed after it leased some hands
// those out (or they would strand until their TTL), logged.
func ClaimIndex(ctx context.Context, index claim.Fallback, req wire.ClaimRequest, log zerolog.Logger) (wire.ClaimResponse, error) {
	if req.N < 1 || req.N > 10_000 {
		return wire.ClaimResponse{}, intake.NewFieldError("n", errors.New("must be 1..10000"))
	}
	if req.TTLMs < 0 {
		return wire.ClaimResponse{}, intake.NewFieldError("ttl_ms", errors.New("must not be negative"))
	}
	jobs, err := index.ClaimIndex(ctx, claim.IndexClaim{N: req.N, Holder: req.Holder, TTLMs: req.TTLMs})
	if errors.Is(err, claim.ErrQueuedBehindLeases) {
		return wire.ClaimResponse{Jobs: []wire.Job{}, QueuedBehindLeases: true}, nil
	}
	if err != nil && len(jobs) == 0 {
		log.Error().Err(err).Msg("index claim failed")
		return wire.ClaimResponse{}, intake.NewKindErrorCause(intake.ErrStore, "index claim failed", err)
	}
	if err != nil {
		log.Error().Err(err).Int("jobs", len(jobs)).Msg("index claim failed part way; handing out the jobs it leased")
	}
	resp := wire.ClaimResponse{Jobs: make([]wire.Job, len(jobs))}
	for i, j := range jobs {
		resp.Jobs[i] = WireJob(j)
	}
	return resp, nil
}

// Remote hands out and takes back the leases of renderers on other machines: Claim takes
// leased jobs from the same ready set (falling back to the index like a local worker), Extend
// and Release keep or give back a lease. Their results are applied by the Applier like a local
// worker's. A browser farm elsewhere renders exactly like a render worker.
//
// Each remote names itself (renderer, in the claim) and holds its leases under a holder id
// derived from that name alone (intake.RemoteHolder), so explain shows "remote:<name>" for its leases
// in any process and across restarts of worker 0. One remote holds at most
// queue.max_remote_leases live leases, and all remotes together at most half the lease table
// (remoteTableShare): the table is shared with the local render workers, and a remote that
// stops returning its leases, or one that claims under ever new names with the one shared
// token, must not starve them.
type Remote struct {
	Claimer  *claim.Claimer   // worker 0's, counting grants in its shm block
	Locks    *intake.KeyLocks // the Applier's; nil: none
	Seg      *shm.Segment
	Settings func() *intake.Settings
	Now      func() int64

	// mu guards the reservations: a claim counts the live leases and reserves its room under
	// mu, claims without it, and gives the reservation back. A claim in flight is counted
	// twice at most (its grants and its reservation), never not at all: the caps may be
	// under-filled for a moment, never exceeded, and claims do not wait on each other's scans.
	mu          sync.Mutex
	reserved    map[uint64]int // by holder
	reservedAll int
}

// remoteTableShare is the share of the lease table that remote renderers may hold together,
// as a divisor: at most 1/remoteTableShare of queue.max_leases, so that the local render
// workers always keep at least half of it, whatever queue.max_remote_leases is.
const remoteTableShare = 2

// Claim grants up to req.Limit (1..1000) jobs to the remote req.Renderer ("" is
// intake.DefaultRenderer) for req.Lease ("" is queue.lease_ttl), within both caps. Bad input is a
// *intake.FieldError naming "limit", "lease" or "renderer"; a remote at a cap gets intake.ErrTooMany naming
// "limit"; a claim that failed before it granted anything an error matching intake.ErrStore.
func (x *Remote) Claim(ctx context.Context, req wire.RemoteClaimRequest) (wire.RemoteClaimResponse, error) {
	set := x.Settings()
	if req.Limit < 1 || req.Limit > 1000 {
		return wire.RemoteClaimResponse{}, intake.NewFieldError("limit", errors.New("must be 1..1000"))
	}
	ttl, err := leaseTTL(set, req.Lease)
	if err != nil {
		return wire.RemoteClaimResponse{}, err
	}
	if req.Renderer == "" {
		req.Renderer = intake.DefaultRenderer
	}
	if err := intake.ValidRenderer(req.Renderer); err != nil {
		return wire.RemoteClaimResponse{}, intake.NewFieldError("renderer", err)
	}
	holder := intake.RemoteHolder(req.Renderer)
	room, refusal := x.reserve(holder, req.Renderer, min(req.Limit, set.MaxRemoteLeases), set.MaxRemoteLeases)
	if room == 0 {
		return wire.RemoteClaimResponse{}, intake.NewFieldError("limit", intake.NewKindError(intake.ErrTooMany, refusal))
	}
	jobs, err := x.Claimer.ClaimFor(ctx, room, ttl, holder)
	x.unreserve(holder, room)
	resp := wire.RemoteClaimResponse{Jobs: make([]wire.RemoteJob, len(jobs))}
	switch {
	case errors.Is(err, claim.ErrQueuedBehindLeases):
		resp.QueuedBehindLeases = len(jobs) == 0
	case err != nil && len(jobs) == 0:
		return wire.RemoteClaimResponse{}, intake.NewKindErrorCause(intake.ErrStore, err.Error(), err)
	}
	for i, j := range jobs {
		device, url, _ := cachekey.Split(j.Key)
		resp.Jobs[i] = wire.RemoteJob{Job: WireJob(j), URL: url, Device: device}
		resp.Jobs[i].HostToken = nil // held by worker 0 for the remote, under its holder id
	}
	return resp, nil
}

// reserve counts the live leases of holder and of every remote, and reserves up to want of
// the room both caps leave. It returns 0 and why when there is none.
func (x *Remote) reserve(holder uint64, name string, want, perHolder int) (int, string) {
	leases, now := x.Seg.Leases(), x.Now()
	all := leases.Capacity() / remoteTableShare
	x.mu.Lock()
	defer x.mu.Unlock()
	held := leases.CountHolder(holder, now) + x.reserved[holder]
	heldAll := leases.CountHolders(now, intake.IsRemoteHolder) + x.reservedAll
	switch {
	case held >= perHolder:
		return 0, fmt.Sprintf("renderer %q holds %d live leases, queue.max_remote_leases is %d: return results or release leases first",
			name, held, perHolder)
	case heldAll >= all:
		return 0, fmt.Sprintf("all remote renderers together hold %d live leases, at most half of queue.max_leases (%d): return results or release leases first",
			heldAll, leases.Capacity())
	}
	room := min(want, perHolder-held, all-heldAll)
	if x.reserved == nil {
		x.reserved = map[uint64]int{}
	}
	x.reserved[holder] += room
	x.reservedAll += room
	return room, ""
}

// unreserve gives back a reservation once its claim returned (its grants now count as leases).
func (x *Remote) unreserve(holder uint64, room int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.reserved[holder] -= room; x.reserved[holder] <= 0 {
		delete(x.reserved, holder)
	}
	x.reservedAll -= room
}

// leaseTTL reads a TTL a remote asked for: "" is queue.lease_ttl, anything else must lie in
// [claim.MinLeaseTTL, queue.lease_ttl], or it is a *intake.FieldError naming "lease".
func leaseTTL(set *intake.Settings, s string) (int64, error) {
	maxMs := set.LeaseTTL.Milliseconds()
	if s == "" {
		return maxMs, nil
	}
	d, err := wire.ParseDuration(s)
	if err != nil || d.Milliseconds() < claim.MinLeaseTTL.Milliseconds() || d.Milliseconds() > maxMs {
		return 0, intake.NewFieldError("lease", fmt.Errorf("must be a duration between %s and queue.lease_ttl (%s)",
			claim.MinLeaseTTL, set.LeaseTTL))
	}
	return d.Milliseconds(), nil
}

// heldLease checks req's lease under the key's lock (the Applier's) before anything touches
// it: a *intake.FieldError naming the field for one that cannot be a lease of this key, intake.ErrLeaseNotHeld
// for one that is no longer held. On success the caller holds the lock until it calls unlock:
// an extend or release is then never interleaved with a result of the same key being applied,
// which holds the lock from its check to its release.
func (x *Remote) heldLease(req wire.LeaseRequest) (l shm.Lease, unlock func(), err error) {
	if len(req.Key) == 0 || len(req.Key) > store.MaxKeyLen {
		return l, nil, intake.NewFieldError("key", fmt.Errorf("must be the job's key, 1..%d bytes", store.MaxKeyLen))
	}
	unlock = func() {}
	if x.Locks != nil {
		unlock = x.Locks.Lock([][]byte{req.Key})
	}
	l = intake.ShmLease(req.Lease)
	switch err := x.Seg.Leases().Check(l, shm.KeyHash(req.Key), x.Now()); {
	case errors.Is(err, shm.ErrLeaseSlot):
		unlock()
		return l, nil, intake.NewFieldError("lease.slot", err)
	case errors.Is(err, shm.ErrLeaseKey):
		unlock()
		return l, nil, intake.NewFieldError("lease.key_hash", intake.NewKindError(err, "not the hash of key: "+err.Error()))
	case err != nil:
		unlock()
		return l, nil, intake.NewFieldError("lease", intake.NewKindErrorCause(intake.ErrLeaseNotHeld, "no longer held: "+err.Error(), err))
	}
	return l, unlock, nil
}

// Extend extends a held lease by req.TTL ("" is queue.lease_ttl), under the key's lock.
func (x *Remote) Extend(req wire.LeaseRequest) (wire.LeaseResponse, error) {
	l, unlock, err := x.heldLease(req)
	if err != nil {
		return wire.LeaseResponse{}, err
	}
	defer unlock()
	set := x.Settings()
	ttl, err := leaseTTL(set, req.TTL)
	if err != nil {
		return wire.LeaseResponse{}, err
	}
	now := x.Now()
	info, _ := x.Seg.Leases().Lookup(l.KeyHash, now)
	if !x.Seg.Leases().Extend(&l, now, ttl) {
		return wire.LeaseResponse{}, intake.NewFieldError("lease", intake.ErrLeaseNotHeld)
	}
	if intake.IsRemoteHolder(info.Holder) { // the host slot is kept as long as the row
		host := set.Hosts.Site(req.Key)
		tokens := hosts.Tokens(&set.Hosts, host)
		hosts.ExtendTokensOf(x.Seg.Leases(), shm.HostHash(host), tokens, info.Holder, now, now+ttl)
	}
	return wire.LeaseResponse{Lease: intake.WireLease(l), ExpiresAt: time.UnixMilli(now + ttl).UTC()}, nil
}

// Release gives a held lease back unrendered, under the key's lock: the row is claimable again
// at once (no grace: nothing was written that a sweep must see first).
func (x *Remote) Release(req wire.LeaseRequest) error {
	l, unlock, err := x.heldLease(req)
	if err != nil {
		return err
	}
	defer unlock()
	now := x.Now()
	info, _ := x.Seg.Leases().Lookup(l.KeyHash, now)
	if !x.Seg.Leases().Release(l, now, 0) {
		return intake.NewFieldError("lease", intake.ErrLeaseNotHeld)
	}
	intake.ReleaseRemoteHostSlot(x.Seg, &x.Settings().Hosts, req.Key, info.Holder, now)
	return nil
}
