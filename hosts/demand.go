package hosts

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"sync"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// A division that follows demand. The equal division (share) suits rows spread evenly over the
// nodes, but a node's rows of a host are those of its shards, and with a few nodes and a
// burst of one site the shards' spread is uneven: a node with no rows of a host due would hold
// part of its limit that another needs. So each node publishes its demand, the rows due it has
// of its busiest hosts (DemandHosts of them, as its sweep counted them), with each division it
// confirms, and the division of the round after a settled one divides each host's limit by
// the demands published with that settled division (demandShares): a node with no rows due of
// a host holds none of it while another has some, and the slots left stay where the settled
// division had them while their nodes' quotas allow, else follow the largest remainders. The
// demands a division was computed from are frozen in the confirmations of the settled division
// (a node publishes its demand when it first confirms a division, and keeps it while it
// confirms that one), so every node that saw the division settled computes the same division
// from them and the settled one's shares; a hash of them and of the settled division (its
// basis) is part of what a node confirms, so a division settles only when every node confirmed
// the same one. A host none of the nodes named
// is divided equally, as is every host while no division has settled yet.

// DemandHosts is how many hosts a node publishes its demand for: its busiest.
const DemandHosts = 8

// divisionHosts is how many hosts a division follows the demand of (the most wanted over every
// node): twice this fits the farm's shares in the segment (the division settled and the next).
const divisionHosts = shm.FarmShares / 2

// demandDivision is a division of round round on basis (0: the equal one): mine is this node's
// share of each host it follows the demand of (by host hash), limits their limits. A host
// without an entry is divided equally.
type demandDivision struct {
	round, basis int64
	mine, limits map[uint64]int
	all          map[uint64][]int // every node's share of each host, in the live nodes' order
}

// demandSinks maps a segment to the Farm of its worker 0, which the sweep's counts go to
// (Shaper.ReportDemand): the sweep and the farm are parts of one process that do not know
// each other.
var demandSinks sync.Map // *shm.Segment → *Farm

func registerDemandSink(seg *shm.Segment, f *Farm) { demandSinks.Store(seg, f) }

// ReportDemand records the node's rows due per host (site) as the sweep counted them: the
// DemandHosts busiest go with its next confirmation of a division.
func (f *Farm) ReportDemand(rows map[string]int) {
	hosts := slices.Collect(maps.Keys(rows))
	slices.SortFunc(hosts, func(a, b string) int {
		return cmp.Or(cmp.Compare(rows[b], rows[a]), cmp.Compare(a, b))
	})
	top := make(map[string]int, min(len(hosts), DemandHosts))
	for _, h := range hosts[:min(len(hosts), DemandHosts)] {
		if rows[h] > 0 {
			top[h] = rows[h]
		}
	}
	f.mu.Lock()
	f.demand = top
	changed := demandChanged(f.confirmedDemand, top)
	f.mu.Unlock()
	if changed {
		select { // confirm the next division now, not at the next tick
		case f.confirmNow <- struct{}{}:
		default:
		}
	}
}

// moveEarly reports whether the node moves to the round after the settled one (of m) ahead of
// the clock: the next division gives some node another share than the settled one, or this
// node's demand moved from what it published, or another node moved on for either. Under mu.
func (f *Farm) moveEarly(m Membership) bool {
	return m.Settled && f.afterSettled.round == m.SettledRound+1 && m.Nodes != FarmNone &&
		(f.demandMoved(m) || demandChanged(f.confirmedDemand, f.demand) || f.othersAhead == m.SettledRound+1)
}

// demandOf is the demand node r published with its confirmation of d, if it confirmed it.
func demandOf(r store.FarmConfirm, d division) (map[string]int, bool) {
	switch {
	case r.Members == d.members && r.Round == d.round && r.Basis == d.basis:
		return r.Demand, true
	case r.PrevMembers == d.members && r.PrevRound == d.round && r.PrevBasis == d.basis:
		return r.PrevDemand, true
	}
	return nil, false
}

// divisionOf returns the division d this node used and confirmed: the equal one on basis 0,
// else the one it computed (atSettled or afterSettled).
func (f *Farm) divisionOf(d division, _ []store.FarmConfirm, _ []string, _ string) demandDivision {
	for _, k := range []demandDivision{f.afterSettled, f.atSettled} {
		if k.round == d.round && k.basis == d.basis && d.basis != 0 {
			return k
		}
	}
	return demandDivision{round: d.round}
}

// nextDivision computes the division of the round after settled from the demand every live
// node (live, sorted) published with its confirmation of settled: the same for every node
// that reads the same rows. me is this node's id.
func (f *Farm) nextDivision(settled division, rows []store.FarmConfirm, live []string, me string) demandDivision {
	out := demandDivision{round: settled.round + 1}
	if f.opts.Max == nil {
		return out
	}
	demands := make([]map[string]int, len(live))
	for i, n := range live {
		j := slices.IndexFunc(rows, func(r store.FarmConfirm) bool { return r.Node == n })
		if j < 0 {
			return out
		}
		d, ok := demandOf(rows[j], settled)
		if !ok {
			return out
		}
		demands[i] = d
	}
	total := map[string]int{}
	for _, d := range demands {
		for h, n := range d {
			total[h] += max(n, 0)
		}
	}
	hosts := slices.Collect(maps.Keys(total))
	slices.SortFunc(hosts, func(a, b string) int {
		return cmp.Or(cmp.Compare(total[b], total[a]), cmp.Compare(a, b))
	})
	hosts = hosts[:min(len(hosts), divisionHosts)]
	if len(hosts) == 0 {
		return out
	}
	slices.Sort(hosts)
	myIndex := slices.Index(live, me)
	if myIndex < 0 {
		return out
	}
	h := fnv.New64a()
	var b [8]byte
	// The division before (settled) is part of the basis: its shares are where the slots stay
	// (demandShares), and its basis and round name them.
	for _, v := range []int64{out.round, settled.basis} {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	out.mine, out.limits, out.all = map[uint64]int{}, map[uint64]int{}, map[uint64][]int{}
	for _, host := range hosts {
		hash := shm.HostHash([]byte(host))
		limit := Clamp(f.opts.Max([]byte(host)))
		vec := make([]int, len(live))
		h.Write([]byte(host))
		h.Write([]byte{0})
		for i, d := range demands {
			vec[i] = d[host]
			binary.LittleEndian.PutUint64(b[:], uint64(vec[i]))
			h.Write([]byte(live[i]))
			h.Write(b[:])
		}
		prev, ok := f.atSettled.all[hash]
		if f.atSettled.round != settled.round || f.atSettled.basis != settled.basis || !ok {
			prev = make([]int, len(live)) // the equal division of the settled round
			for i := range prev {
				prev[i] = share(limit, hash, uint16(i), uint16(len(live)), settled.round)
			}
		}
		all := demandShares(limit, hash, vec, prev, out.round)
		out.mine[hash], out.limits[hash], out.all[hash] = all[myIndex], limit, all
	}
	out.basis = int64(h.Sum64()>>1) | 1 // never 0, the equal division's
	return out
}

// setTable computes the farm's shares for a membership m settled in m.SettledRound: the
// node's share of every host that the division settled or the next follows the demand of.
func (f *Farm) setTable(m Membership) {
	f.tableHashes, f.tableShares = nil, nil
	seen := map[uint64]bool{}
	for _, d := range []demandDivision{f.atSettled, f.afterSettled} {
		for hash, limit := range d.limits {
			if seen[hash] {
				continue
			}
			seen[hash] = true
			at, ok := f.atSettled.mine[hash]
			if !ok {
				at = share(limit, hash, m.Index, m.Nodes, m.SettledRound)
			}
			after, ok := f.afterSettled.mine[hash]
			if !ok {
				after = share(limit, hash, m.Index, m.Nodes, m.SettledRound+1)
			}
			f.tableHashes = append(f.tableHashes, hash)
			f.tableShares = append(f.tableShares, HostShares{Known: true, AtSettled: at, AfterSettled: after})
		}
	}
}

// demandMoved reports whether the division of the round after the settled one (of m, in
// m.SettledRound) gives some node another share of some host than the settled one. Every node
// that saw the same round settled computes the same divisions, so all of them move on
// together.
func (f *Farm) demandMoved(m Membership) bool {
	vec := func(d demandDivision, hash uint64, limit int, round int64) []int {
		if v, ok := d.all[hash]; ok {
			return v
		}
		v := make([]int, m.Nodes)
		for i := range v {
			v[i] = share(limit, hash, uint16(i), m.Nodes, round)
		}
		return v
	}
	for _, d := range []demandDivision{f.atSettled, f.afterSettled} {
		for hash, limit := range d.limits {
			if !slices.Equal(vec(f.atSettled, hash, limit, m.SettledRound), vec(f.afterSettled, hash, limit, m.SettledRound+1)) {
				return true
			}
		}
	}
	return false
}

// demandChanged reports whether the node's demand now (cur) differs from what it published
// (was) by enough to divide the limits anew: a host wanted that was not, or no longer wanted,
// or a count moved by more than a quarter (and 4 rows).
func demandChanged(was, cur map[string]int) bool {
	for h, n := range cur {
		w := was[h]
		if (w > 0) != (n > 0) || abs(n-w) > max(4, w/4) {
			return true
		}
	}
	for h, w := range was {
		if w > 0 && cur[h] == 0 {
			return true
		}
	}
	return false
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
