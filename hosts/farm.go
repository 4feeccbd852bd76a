package hosts

import (
	"slices"

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
//     clock (the database's) divided by RoundMs, and worker 0 moves the node's takes to it
//     (farm words' Round), so a remainder that does not divide evenly moves from node to node
//     and no node's rows of a host starve, even when L < n. Once a division has settled, the
//     next round's instead divides each of the nodes' busiest hosts by the demand they
//     published with it (demand.go), and the node's shares of those reach its takes through
//     the segment's farm shares (Membership.Host). A membership, a round and the demand it
//     follows are a division;
//   - a share that shrinks does so at once (the node grants fewer from then on). Each node
//     confirms the division it uses once each of its renders in flight began after its takes
//     used it or fits its share under it (holds one of the host's first share tokens, for a
//     host the division follows the demand of: Farm.Confirm); a division is settled when every live node confirmed it and no
//     node gone lately may still render. A confirmation counts only for the membership it was
//     made in (Farm.Members withdraws the node's own when its membership changes, and the
//     rows it reads first after that may hold older ones: Farm.settle). A share grows at once under a settled division; until
//     then the node holds the least of its shares under the division now, the membership before
//     (for GraceMs at most: longer than a render lasts plus a tick, the bound for a node that
//     cannot confirm) and the rounds since the last one settled (or within the grace).
//
// Invariant: the renders of a host in flight over the whole cluster never exceed its limit.
// Each node's renders fit its share of the last settled division until the next one settles,
// and a node that cannot confirm (dead, paused, cut off) grants nothing a lease TTL after its
// last heartbeat and renders nothing a grace after that. It assumes that the nodes agree on the
// clock within the grace's margin (each corrects its clock by the database's) and that a node's
// ticks that stop for half a lease TTL make it start again from no share (Farm.Members). The
// history check is fuzz/farm_confirm_model_test.go. The AIMD limit a host's errors set and a
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

// farmShare is the node's share of a host's limit at nowMs under its farm membership f: its
// share under the division now (the current membership, the round now) alone once that
// division is settled (every live node confirmed it, farmnode.go); until then the least of its
// shares under the memberships and rounds in force since nowMs − f.GraceMs, and under the last
// round of this membership that was settled. growsAtMs is when it may next grow by the grace
// (0 when it is the whole limit): a share of 0 is held until then, or until the division now is
// settled, whichever comes first.
func farmShare(f Membership, limit int, hostHash uint64, nowMs int64) (n int, growsAtMs int64) {
	if f.Nodes == 0 {
		return limit, 0
	}
	roundMs := max(f.RoundMs, 1)
	clusterNow := nowMs + f.ClockOffsetMs
	then := clusterNow - f.GraceMs
	clockRound := floorDiv(clusterNow, roundMs)
	rounds := []int64{clockRound}
	if f.Adopted {
		rounds[0] = f.Round // worker 0 moves the node to a round; its takes do not
	}
	switch {
	case f.Settled && f.SettledRound == rounds[0]:
	case f.Settled && (f.SettledRound == rounds[0]-1 || f.SettledRound == rounds[0]+1):
		// The round next to this one is settled: every node's renders fit its share of it, and
		// each holds that share until this round is settled too.
		rounds = append(rounds, f.SettledRound)
	default:
		// Every round that began within the grace, and the last one settled and the next.
		for r := floorDiv(then, roundMs); r <= clockRound && len(rounds) <= maxGraceRounds; r++ {
			rounds = append(rounds, r)
		}
		if f.Settled {
			rounds = append(rounds, f.SettledRound, f.SettledRound+1)
		}
	}
	n = limit
	for _, r := range rounds {
		if f.Settled {
			n = min(n, settledShare(f, limit, hostHash, f.Index, f.Nodes, r))
		} else {
			n = min(n, share(limit, hostHash, f.Index, f.Nodes, r))
		}
	}
	if !f.Settled && nowMs-f.GraceMs < f.SinceMs {
		// The membership before, until the one now is settled or a grace has passed. If it was
		// settled in round S, a node gone since holds at most its share of S or of S+1 (no node
		// moves past the round after the last settled one, Farm.Confirm), and every node holds
		// the least of its own shares of both; otherwise every round within the grace.
		prev := rounds
		if f.PrevSettled {
			prev = []int64{f.SettledRound, f.SettledRound + 1}
		}
		for _, r := range prev {
			if f.PrevSettled {
				n = min(n, settledShare(f, limit, hostHash, f.PrevIndex, f.PrevNodes, r))
			} else {
				n = min(n, share(limit, hostHash, f.PrevIndex, f.PrevNodes, r))
			}
		}
	}
	if n == limit {
		return n, 0
	}
	// It may grow a grace after the membership changed, or after the round began or the next
	// one begins (the first of those still ahead); under a settled membership, as soon as the
	// next round begins and is confirmed.
	next := (rounds[0]+1)*roundMs - f.ClockOffsetMs + f.GraceMs
	candidates := []int64{f.SinceMs + f.GraceMs, rounds[0]*roundMs - f.ClockOffsetMs + f.GraceMs}
	if f.Settled {
		candidates = append(candidates, (rounds[0]+1)*roundMs-f.ClockOffsetMs)
	}
	for _, at := range candidates {
		if at > nowMs && at < next {
			next = at
		}
	}
	return n, next
}

// settledShare is the node's share (rank index of n) of a host in round r of the membership
// whose last settled round f.SettledRound is: the farm's shares of the host in that round and
// the next, when its division follows demand (f.Host, demand.go), else the equal one.
func settledShare(f Membership, limit int, hostHash uint64, index, n uint16, r int64) int {
	if f.Host.Known {
		switch r {
		case f.SettledRound:
			return min(limit, f.Host.AtSettled)
		case f.SettledRound + 1:
			return min(limit, f.Host.AfterSettled)
		}
	}
	return share(limit, hostHash, index, n, r)
}

// maxGraceRounds bounds the rounds a share looks back on: a round shorter than a grace / 64 is
// not one a Farm is given (FarmRound).
const maxGraceRounds = 64

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

// demandShares divides a host's limit among n nodes in proportion to their demand for it
// (demand[i]: node i's rows of the host that are due now, as it published them): node i holds
// ⌊L·d_i/D⌋ of the limit L (D the sum), and the slots left go one each to nodes with a
// positive remainder L·d_i mod D: first to those that held more than that floor under the
// division before (prev, nil: none), then by the largest remainder, ties broken in the
// rotation's order from the start the host's hash and the round choose (share). A node with
// no demand holds none while another has some: its remainder is 0, and the slots left never
// outnumber the nodes with a positive remainder. With no demand at all it is the equal
// division (share). It depends on its arguments alone, so every node that reads the same
// demands and settled the same division before computes the same division, and the shares add
// up to L exactly.
//
// A slot stays where it is while its node's quota still rounds up to it: every node with rows
// due uses a slot as well as another, and a slot that moves idles while the renders of the
// node that gives it up end and the nodes confirm the move. So a slot moves when its node's
// demand is gone, or its quota no longer reaches it, not each time the remainders reorder as
// the nodes' rows drain.
//
// It is the rule of a division that follows demand (demand.go): Farm.nextDivision computes
// each round's from the demands the nodes published with the settled one, and its shares.
func demandShares(limit int, hostHash uint64, demand, prev []int, round int64) []int {
	n := len(demand)
	out := make([]int, n)
	total := 0
	for _, d := range demand {
		total += max(d, 0)
	}
	if n == 0 {
		return out
	}
	if total == 0 || limit <= 0 {
		for i := range out {
			out[i] = share(limit, hostHash, uint16(i), uint16(n), round)
		}
		return out
	}
	start := int((hostHash + uint64(round)) % uint64(n))
	rem := make([]int, n)
	left := limit
	for i, d := range demand {
		d = max(d, 0)
		q := limit * d
		out[i], rem[i] = q/total, q%total
		left -= out[i]
	}
	// held: the node held a slot more than its floor before, and its quota still rounds up.
	held := func(i int) bool { return len(prev) == n && prev[i] > out[i] && rem[i] > 0 }
	order := make([]int, n) // the nodes in the rotation's order from start
	for k := range order {
		order[k] = (start + k) % n
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if ha, hb := held(a), held(b); ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		return rem[b] - rem[a]
	})
	for _, i := range order[:left] {
		out[i]++
	}
	return out
}
