package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Remote serves renderers on other machines: POST /v1/claim takes leased jobs from the same
// ready set (falling back to the index like a local worker), POST /v1/results applies their
// outcomes like a local worker's, and POST /v1/leases/extend and /v1/leases/release keep or give
// back a lease. A browser farm elsewhere renders exactly like a render worker.
//
// Each remote names itself (renderer, in the claim) and holds its leases under a holder id
// derived from that name alone, so explain shows "remote:<name>" for its leases in any process
// and across restarts of worker 0. One remote holds at most queue.max_remote_leases live leases,
// and all remotes together at most half the lease table (remoteTableShare): the table is shared
// with the local render workers, and a remote that stops returning its leases, or one that
// claims under ever new names with the one shared token, must not starve them.
type Remote struct {
	Claimer *claim.Claimer // worker 0's, counting grants in its shm block
	Applier *intake.Applier
	Limit   *Limiter              // admits results requests by their bytes; nil: none
	Seg     *shm.Segment          // nil: the Applier's
	Policy  func() *policy.Policy // nil: the Applier's
	Now     func() int64          // nil: the Applier's

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

// Register adds the endpoints to mux.
func (x *Remote) Register(mux *http.ServeMux) {
	if x.Seg == nil {
		x.Seg = x.Applier.Seg
	}
	if x.Policy == nil {
		x.Policy = x.Applier.Policy
	}
	if x.Now == nil {
		x.Now = x.Applier.Now
	}
	mux.HandleFunc("POST /v1/claim", x.claim)
	mux.HandleFunc("POST /v1/results", resultsHandler(x.Applier, x.Limit, false)) // JSON only (README)
	mux.HandleFunc("POST /v1/leases/extend", x.extend)
	mux.HandleFunc("POST /v1/leases/release", x.release)
}

const maxRemoteRequest = 1 << 20 // a claim or lease request

// Remote renderer names: what fits a holder id, so that any process decodes it from the lease
// table alone.
const (
	DefaultRenderer   = "remote"
	maxRendererName   = 10
	rendererAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789-._"
	remoteHolderMark  = uint64(1) << 63 // local holders are pid<<16 | worker index
	rendererCharBits  = 6
	rendererCharsMask = 1<<rendererCharBits - 1
)

// RemoteHolder is the lease holder id of the remote renderer called name (a valid name: see
// ValidRenderer): the top bit set, then six bits per character.
func RemoteHolder(name string) uint64 {
	h := remoteHolderMark
	for i := 0; i < len(name); i++ {
		h |= uint64(strings.IndexByte(rendererAlphabet, name[i])+1) << (rendererCharBits * i)
	}
	return h
}

// ValidRenderer checks a remote renderer's name: 1 to 10 of a-z, 0-9, '-', '.', '_'.
func ValidRenderer(name string) error {
	if name == "" || len(name) > maxRendererName {
		return fmt.Errorf("must be 1..%d characters, got %d", maxRendererName, len(name))
	}
	for i := 0; i < len(name); i++ {
		if strings.IndexByte(rendererAlphabet, name[i]) < 0 {
			return fmt.Errorf("may hold only a-z, 0-9, '-', '.' and '_', got %q", name)
		}
	}
	return nil
}

// HolderName says who holds a lease, for explain: "remote:<name>" for a remote renderer,
// "worker <i> (pid <p>)" for a local worker, and for a hold (shm.HoldHolder: a delete, rush or
// wait keeps the key from being granted a moment) "held after delete/rush/wait".
func HolderName(h uint64) string {
	if h == shm.HoldHolder {
		return "held after delete/rush/wait"
	}
	if h&remoteHolderMark == 0 {
		return fmt.Sprintf("worker %d (pid %d)", h&0xffff, h>>16)
	}
	var b strings.Builder
	b.WriteString("remote:")
	for i := 0; i < maxRendererName; i++ {
		c := (h >> (rendererCharBits * i)) & rendererCharsMask
		if c == 0 || int(c) > len(rendererAlphabet) {
			break
		}
		b.WriteByte(rendererAlphabet[c-1])
	}
	return b.String()
}

func (x *Remote) claim(w http.ResponseWriter, r *http.Request) {
	var req wire.RemoteClaimRequest
	if !decodeJSON(w, r, &req, maxRemoteRequest) {
		return
	}
	cfg := x.Policy().Config()
	if req.Limit < 1 || req.Limit > 1000 {
		writeError(w, http.StatusBadRequest, "limit", "must be 1..1000")
		return
	}
	ttl, ok := leaseTTL(w, cfg, req.Lease)
	if !ok {
		return
	}
	if req.Renderer == "" {
		req.Renderer = DefaultRenderer
	}
	if err := ValidRenderer(req.Renderer); err != nil {
		writeError(w, http.StatusBadRequest, "renderer", err.Error())
		return
	}
	holder := RemoteHolder(req.Renderer)
	room, refusal := x.reserve(holder, req.Renderer, min(req.Limit, cfg.Queue.MaxRemoteLeases), cfg.Queue.MaxRemoteLeases)
	if room == 0 {
		writeError(w, http.StatusTooManyRequests, "limit", refusal)
		return
	}
	jobs, err := x.Claimer.ClaimFor(r.Context(), room, ttl, holder)
	x.unreserve(holder, room)
	resp := wire.RemoteClaimResponse{Jobs: make([]wire.RemoteJob, len(jobs))}
	switch {
	case errors.Is(err, claim.ErrQueuedBehindLeases):
		resp.QueuedBehindLeases = len(jobs) == 0
	case err != nil && len(jobs) == 0:
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	for i, j := range jobs {
		device, url, _ := cachekey.Split(j.Key)
		resp.Jobs[i] = wire.RemoteJob{Job: WireJob(j), URL: url, Device: device}
	}
	writeJSON(w, http.StatusOK, resp)
}

// reserve counts the live leases of holder and of every remote, and reserves up to want of
// the room both caps leave. It returns 0 and why when there is none.
func (x *Remote) reserve(holder uint64, name string, want, perHolder int) (int, string) {
	leases, now := x.Seg.Leases(), x.Now()
	all := leases.Capacity() / remoteTableShare
	x.mu.Lock()
	defer x.mu.Unlock()
	held := leases.CountHolder(holder, now) + x.reserved[holder]
	heldAll := leases.CountHolders(now, func(h uint64) bool { return h&remoteHolderMark != 0 }) + x.reservedAll
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
// [claim.MinLeaseTTL, queue.lease_ttl]. It answers 400 naming lease itself.
func leaseTTL(w http.ResponseWriter, cfg *config.Config, s string) (int64, bool) {
	maxMs := cfg.Queue.LeaseTTL.Ms()
	if s == "" {
		return maxMs, true
	}
	d, err := config.ParseDuration(s)
	if err != nil || d.Ms() < claim.MinLeaseTTL.Milliseconds() || d.Ms() > maxMs {
		writeError(w, http.StatusBadRequest, "lease", fmt.Sprintf("must be a duration between %s and queue.lease_ttl (%s)",
			claim.MinLeaseTTL, cfg.Queue.LeaseTTL))
		return 0, false
	}
	return d.Ms(), true
}

// heldLease reads a lease request, takes the key's lock (the Applier's), and checks the lease
// against the table before anything touches it: 400 naming the field for one that cannot be a
// lease of this key, 409 for one that is no longer held. On success the caller holds the lock
// until it calls unlock: an extend or release is then never interleaved with a result of the
// same key being applied, which holds the lock from its check to its release.
func (x *Remote) heldLease(w http.ResponseWriter, r *http.Request) (req wire.LeaseRequest, l shm.Lease, unlock func(), ok bool) {
	if !decodeJSON(w, r, &req, maxRemoteRequest) {
		return req, l, nil, false
	}
	if len(req.Key) == 0 || len(req.Key) > store.MaxKeyLen {
		writeError(w, http.StatusBadRequest, "key", fmt.Sprintf("must be the job's key, 1..%d bytes", store.MaxKeyLen))
		return req, l, nil, false
	}
	unlock = func() {}
	if x.Applier != nil && x.Applier.Locks != nil {
		unlock = x.Applier.Locks.Lock([][]byte{req.Key})
	}
	if l, ok = x.checkLease(w, req); !ok {
		unlock()
		return req, l, nil, false
	}
	return req, l, unlock, true
}

// checkLease checks req's lease against the table, answering 400 or 409 itself.
func (x *Remote) checkLease(w http.ResponseWriter, req wire.LeaseRequest) (shm.Lease, bool) {
	l := intake.ShmLease(req.Lease)
	switch err := x.Seg.Leases().Check(l, shm.KeyHash(req.Key), x.Now()); {
	case errors.Is(err, shm.ErrLeaseSlot):
		writeError(w, http.StatusBadRequest, "lease.slot", err.Error())
	case errors.Is(err, shm.ErrLeaseKey):
		writeError(w, http.StatusBadRequest, "lease.key_hash", "not the hash of key: "+err.Error())
	case err != nil:
		writeError(w, http.StatusConflict, "lease", "no longer held: "+err.Error())
	default:
		return l, true
	}
	return shm.Lease{}, false
}

func (x *Remote) extend(w http.ResponseWriter, r *http.Request) {
	req, l, unlock, ok := x.heldLease(w, r)
	if !ok {
		return
	}
	defer unlock()
	ttl, ok := leaseTTL(w, x.Policy().Config(), req.TTL)
	if !ok {
		return
	}
	now := x.Now()
	if !x.Seg.Leases().Extend(&l, now, ttl) {
		writeError(w, http.StatusConflict, "lease", "no longer held")
		return
	}
	writeJSON(w, http.StatusOK, wire.LeaseResponse{Lease: intake.WireLease(l), ExpiresAt: time.UnixMilli(now + ttl).UTC()})
}

// release gives a lease back unrendered: the row is claimable again at once (no grace: nothing
// was written that a sweep must see first).
func (x *Remote) release(w http.ResponseWriter, r *http.Request) {
	_, l, unlock, ok := x.heldLease(w, r)
	if !ok {
		return
	}
	defer unlock()
	if !x.Seg.Leases().Release(l, x.Now(), 0) {
		writeError(w, http.StatusConflict, "lease", "no longer held")
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"released": true})
}
