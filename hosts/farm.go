package hosts

import (
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// A cluster's nodes are one farm to a site: a host's limit (render.hosts.max_concurrency or
// its override) is the cluster's, not each node's. It is divided among the live nodes without
// any exchange per render:
//
//   - the live nodes, sorted by id, give each node a rank i of n (the membership, which
//     worker 0 writes to the segment's farm words at each cluster tick);
//   - node i holds ⌊L/n⌋ of a host's L renders, and one more when it is among the L mod n
//     nodes from a start that the host's hash and the round choose: the round is the cluster's
//     clock (the database's) divided by RoundMs, so a remainder that does not divide evenly
//     moves from node to node and no node's rows of a host starve, even when L < n;
//   - a share that shrinks does so at once (the node grants fewer from then on); a share that
//     grows waits GraceMs, longer than a render lasts plus a tick, so that the renders the
//     other nodes began under the division before have ended, and every node has seen the
//     membership change, before this one uses the room they left. A node's share now is the
//     least of its shares under every membership and round in force within the last grace.
//
// So the renders of a host in flight over the whole cluster never exceed its limit, provided
// that the nodes agree on the membership within a tick (they read it from the database at
// each tick) and on the clock within the grace's margin (each corrects its clock by the
// database's). A node killed takes its renders with it; the others see it gone after the
// lease TTL and take its share a grace later. The AIMD limit a host's errors set and a
// refusal's pause apply on top, per node; a pause is shared with every node (the pause board).

// share is the part of a host's limit L that the node of rank index among n holds in round.
func share(limit int, hostHash uint64, index, n uint16, round int64) int {
	switch {
	case n == FarmNone:
		return 0
	case n <= 1:
		return limit
	case index >= n:
		return 0
	}
	base, extra := limit/int(n), uint64(limit%int(n))
	if extra == 0 {
		return base
	}
	start := (hostHash + uint64(round)) % uint64(n)
	if (uint64(index)+uint64(n)-start)%uint64(n) < extra {
		return base + 1
	}
	return base
}

// farmShare is the node's share of a host's limit at nowMs under its farm membership f: the
// least of its shares under the memberships and rounds in force since nowMs − f.GraceMs.
// growsAtMs is when it may next grow (0 when it is the whole limit): a share of 0 is held
// until then.
func farmShare(f Membership, limit int, hostHash uint64, nowMs int64) (n int, growsAtMs int64) {
	if f.Nodes == 0 {
		return limit, 0
	}
	roundMs := max(f.RoundMs, 1)
	clusterNow := nowMs + f.ClockOffsetMs
	then := clusterNow - f.GraceMs
	rounds := []int64{floorDiv(clusterNow, roundMs), floorDiv(then, roundMs)}
	type member struct{ index, n uint16 }
	members := []member{{f.Index, f.Nodes}}
	if nowMs-f.GraceMs < f.SinceMs {
		members = append(members, member{f.PrevIndex, f.PrevNodes})
	}
	n = limit
	for _, m := range members {
		for _, r := range rounds {
			n = min(n, share(limit, hostHash, m.index, m.n, r))
		}
	}
	if n == limit {
		return n, 0
	}
	// It may grow a grace after the membership changed, or after the round began or the next
	// one begins (the first of those still ahead).
	next := (rounds[0]+1)*roundMs - f.ClockOffsetMs + f.GraceMs
	for _, at := range []int64{f.SinceMs + f.GraceMs, rounds[0]*roundMs - f.ClockOffsetMs + f.GraceMs} {
		if at > nowMs && at < next {
			next = at
		}
	}
	return n, next
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// FarmView is the node's farm membership for /v1/queue's cluster section; nil when the node is
// in no farm (a node alone on Badger).
func FarmView(seg *shm.Segment) *wire.QueueFarm {
	f := MembershipOf(seg)
	if f.Nodes == 0 {
		return nil
	}
	v := &wire.QueueFarm{Index: int(f.Index), Nodes: int(f.Nodes), SinceMs: f.SinceMs, GraceMs: f.GraceMs, RoundMs: f.RoundMs}
	if f.Nodes == FarmNone {
		v.Index, v.Nodes = 0, 0
	}
	return v
}
