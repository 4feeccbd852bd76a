// Package cluster is how the nodes of freshq that share one PostgreSQL database divide its
// shards between them: heartbeats, shard leases, and the rendezvous hash that says which live
// node should own each shard. It decides; the database keeps the records (Registry, and the
// rest of a node's cluster capability, Engine: implemented by store/pgstore/pgcluster, which
// speaks only of package store's types and imports nothing of this package), and the node's
// shared memory (shm.Fence, the lease table) stops the node's own grants of what it gives up.
//
// A node on an engine that offers no Engine (the embedded store) is alone: it has no Member,
// owns every shard and grants with no fence. NewNodeMember, NewMissWatch and StatusView build
// a node's cluster parts from its Engine, and build none without one.
//
// # Invariants
//
//   - A shard has at most one owner at a time in the database: an acquire is a conditional
//     update that succeeds only on a lease that is free (handed over) or expired on the
//     database's clock, and it increments the shard's epoch.
//   - A node grants a shard's rows only while it holds the shard: before it gives a shard up
//     (a handover, or a lease found lost) it bumps its fence, so that no entry published
//     before is granted, and revokes its live grants of the shard; and it never grants past
//     grantUntil, which it keeps inside its leases by local elapsed time (three quarters of the
//     TTL from before a renewal, measured on the monotonic clock: grantUntil is what is left of
//     that from the wall clock, and a monotonic timer ends the window when it runs out, so a
//     wall clock stepped back cannot lengthen it), so a paused or partitioned node stops
//     granting before any other node can acquire its shards.
//   - Everything else a node does to a shard (a floor advance, a pass, a result) is fenced by
//     the shard's epoch in the database, in the transaction that does it (store/pgstore).
//
// Shards move only between live nodes: a node's desired shards are those for which it has
// the highest rendezvous weight among the live nodes (heartbeat younger than the TTL, not
// stopping). An owner hands a shard it should no longer own over at its next tick; a stopping
// node hands over all of its shards at once, and the others take them at their next tick.
package cluster

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/freshq/freshq/store"
)

// ErrIdentityInUse is returned when a live process already holds the node's identity
// (node.id), or took it over since this process registered: the store's sentinel, which the
// engine returns.
var ErrIdentityInUse = store.ErrIdentityInUse

// Node is one node's record.
type Node = store.NodeRecord

// Lease is one shard's lease. Owner is "" for a shard handed over or never owned.
type Lease = store.LeaseRecord

// View is the cluster as the database shows it (the Registry's store.Membership), with the
// database's clock.
type View store.Membership

// Live reports whether n heartbeat within ttl of the view's clock and is not stopping.
func (v *View) Live(n *Node, ttl time.Duration) bool {
	return !n.Stopping && n.HeartbeatAt.After(v.Now.Add(-ttl))
}

// LiveIDs is the IDs of the live nodes.
func (v *View) LiveIDs(ttl time.Duration) []string {
	var ids []string
	for i := range v.Nodes {
		if v.Live(&v.Nodes[i], ttl) {
			ids = append(ids, v.Nodes[i].ID)
		}
	}
	return ids
}

// Desired is the node that should own shard among nodes: the one with the highest rendezvous
// weight hash(id, shard), ties broken by the smaller id. A node that joins or leaves moves only
// the shards it wins or held, about 1/n of them. "" when nodes is empty.
func Desired(shard int32, nodes []string) string {
	best, bestW := "", uint64(0)
	for _, id := range nodes {
		w := weight(id, shard)
		if best == "" || w > bestW || (w == bestW && id < best) {
			best, bestW = id, w
		}
	}
	return best
}

func weight(id string, shard int32) uint64 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(shard))
	d := xxhash.New()
	_, _ = d.WriteString(id)
	_, _ = d.Write([]byte{0})
	_, _ = d.Write(b[:])
	return d.Sum64()
}

// Plan is what one node does with the shards in one tick.
type Plan struct {
	Keep    []Lease // held and still wanted: renew at their epoch
	Release []Lease // held and wanted by another live node: hand over
	Acquire []Lease // wanted, and free or expired: take (at the epoch seen)
}

// PlanFor decides node me's moves over view: every shard the view shows me holding is kept or
// released; every shard that should be mine and is free or expired is acquired. A shard owned
// by another node whose lease has not expired is left to that node to hand over. A stopping
// node (not live) releases everything.
func PlanFor(view *View, me string, ttl time.Duration) Plan {
	live := view.LiveIDs(ttl)
	var p Plan
	for _, l := range view.Leases {
		want := Desired(l.Shard, live)
		switch {
		case l.Owner == me && want == me:
			p.Keep = append(p.Keep, l)
		case l.Owner == me:
			p.Release = append(p.Release, l)
		case want == me && (l.Owner == "" || !l.ExpiresAt.After(view.Now)):
			p.Acquire = append(p.Acquire, l)
		}
	}
	return p
}

// Registry keeps the cluster's records; store/pgstore/pgcluster implements it. Every time it
// compares is the database's.
type Registry interface {
	Register(ctx context.Context, id, addr, incarnation string, ttl time.Duration) error
	Heartbeat(ctx context.Context, id, incarnation string) error
	SetStopping(ctx context.Context, id, incarnation string) error
	Deregister(ctx context.Context, id, incarnation string) error
	ReadView(ctx context.Context) (store.Membership, error)
	Acquire(ctx context.Context, id string, shard int32, seen int64, ttl time.Duration) (epoch int64, ok bool, err error)
	Renew(ctx context.Context, id string, shards []int32, epochs []int64, ttl time.Duration) (map[int32]bool, error)
	Release(ctx context.Context, id string, shards []int32, epochs []int64) error
}

// FigureRegistry is a Registry that keeps each node's capacity figures on its heartbeat record
// (pgcluster's is one). HeartbeatFigures is Heartbeat that also replaces the node's figures,
// in the same write, so the figures are as fresh as the heartbeat.
type FigureRegistry interface {
	Registry
	HeartbeatFigures(ctx context.Context, id, incarnation string, figures []byte) error
}
