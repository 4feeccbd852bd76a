// Package clustertest is an in-memory cluster.Registry for tests of the membership protocol:
// the unit tests of package cluster and the interleaving model in fuzz/.
package clustertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/store"
)

var _ cluster.Registry = (*MemRegistry)(nil)

// MemRegistry is a cluster's records in memory (cluster.Registry), with a clock the test
// moves (Advance, Now). OnRelease, when set, is called as a handover arrives, before it
// applies: a test looks there at what the releasing node still grants. FailNextRenew makes the
// next Renew fail, as an unreachable database would.
type MemRegistry struct {
	mu            sync.Mutex
	now           time.Time
	nodes         map[string]*cluster.Node
	inc           map[string]string
	leases        []cluster.Lease
	FailNextRenew bool
	OnRelease     func(shards []int32)
}

func NewMemRegistry(shards int, now time.Time) *MemRegistry {
	r := &MemRegistry{now: now, nodes: map[string]*cluster.Node{}, inc: map[string]string{}}
	for sh := range int32(shards) {
		r.leases = append(r.leases, cluster.Lease{Shard: sh})
	}
	return r
}

func (r *MemRegistry) Register(_ context.Context, id, addr, inc string, ttl time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.nodes[id]; ok && r.inc[id] != inc && !n.Stopping && n.HeartbeatAt.After(r.now.Add(-ttl)) {
		return cluster.ErrIdentityInUse
	}
	r.nodes[id] = &cluster.Node{ID: id, Addr: addr, StartedAt: r.now, HeartbeatAt: r.now}
	r.inc[id] = inc
	return nil
}

func (r *MemRegistry) Heartbeat(_ context.Context, id, inc string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.nodes[id]; ok && r.inc[id] == inc && !n.Stopping {
		n.HeartbeatAt = r.now
		return nil
	}
	return cluster.ErrIdentityInUse
}

func (r *MemRegistry) SetStopping(_ context.Context, id, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.nodes[id]; ok {
		n.Stopping = true
	}
	return nil
}

func (r *MemRegistry) Deregister(_ context.Context, id, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodes, id)
	return nil
}

func (r *MemRegistry) ReadView(context.Context) (store.Membership, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := store.Membership{Now: r.now, Leases: slices.Clone(r.leases)}
	for _, n := range r.nodes {
		v.Nodes = append(v.Nodes, *n)
	}
	return v, nil
}

func (r *MemRegistry) Acquire(_ context.Context, id string, shard int32, seen int64, ttl time.Duration) (int64, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.leases[shard]
	if l.Epoch != seen || (l.Owner != "" && l.Owner != id && l.ExpiresAt.After(r.now)) {
		return 0, false, nil
	}
	l.Owner, l.Epoch, l.ExpiresAt = id, l.Epoch+1, r.now.Add(ttl)
	return l.Epoch, true, nil
}

func (r *MemRegistry) Renew(_ context.Context, id string, shards []int32, epochs []int64, ttl time.Duration) (map[int32]bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.FailNextRenew {
		r.FailNextRenew = false
		return nil, errors.New("connection refused")
	}
	out := map[int32]bool{}
	for i, sh := range shards {
		if l := &r.leases[sh]; l.Owner == id && l.Epoch == epochs[i] {
			l.ExpiresAt = r.now.Add(ttl)
			out[sh] = true
		}
	}
	return out, nil
}

func (r *MemRegistry) Release(_ context.Context, id string, shards []int32, epochs []int64) error {
	if r.OnRelease != nil {
		r.OnRelease(shards)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, sh := range shards {
		if l := &r.leases[sh]; l.Owner == id && l.Epoch == epochs[i] {
			l.Owner, l.ExpiresAt = "", r.now
		}
	}
	return nil
}

func (r *MemRegistry) Advance(d time.Duration) {
	r.mu.Lock()
	r.now = r.now.Add(d)
	r.mu.Unlock()
}

// Now is the registry's clock.
func (r *MemRegistry) Now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

// SetLease overwrites a shard's lease, as another node's acquire would.
func (r *MemRegistry) SetLease(l cluster.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leases[l.Shard] = l
}

// Owners counts the unexpired leases of each owner.
func (r *MemRegistry) Owners() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := map[string]int{}
	for _, l := range r.leases {
		if l.Owner != "" && l.ExpiresAt.After(r.now) {
			c[l.Owner]++
		}
	}
	return c
}
