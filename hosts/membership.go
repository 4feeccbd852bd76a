package hosts

import "github.com/freshq/freshq/shm"

// FarmNone marks PrevNodes (or Nodes) as "no membership this node may count on": its share of
// every host is 0 under it. A node that joins a farm of others starts from it, and so does one
// whose membership changed twice within a grace.
const FarmNone = 0xffff

// Membership is the node's place in its farm, as the division of each host's limit reads it
// (farm.go). It is kept in the segment's farm words (shm.Hosts.LoadFarm), packed as
// docs/shm-format.md draws them: worker 0 writes it at each cluster tick, every process reads
// it at each take. The zero Membership is "no farm": a node alone holds each host's whole limit.
type Membership struct {
	Index, Nodes         uint16 // the node's rank among the live nodes (by id) and their count; Nodes 0: no farm
	PrevIndex, PrevNodes uint16 // the membership before, in force until SinceMs
	SinceMs              int64  // local ms when the current membership took effect
	GraceMs              int64  // how long a share that grew waits before it is used
	RoundMs              int64  // the period at which a limit that does not divide evenly rotates its remainder
	ClockOffsetMs        int64  // the cluster's clock (the database's) minus this node's
}

// MembershipOf reads the node's membership from the segment. Any process may call it; it
// never blocks (a read that cannot copy the words whole is "no farm").
func MembershipOf(seg *shm.Segment) Membership {
	w := seg.Hosts().LoadFarm()
	return Membership{
		Index: uint16(w[0]), Nodes: uint16(w[0] >> 16), PrevIndex: uint16(w[0] >> 32), PrevNodes: uint16(w[0] >> 48),
		SinceMs: int64(w[1]), GraceMs: int64(w[2]), RoundMs: int64(w[3]), ClockOffsetMs: int64(w[4]),
	}
}

// setMembership writes m to the segment's farm words. Only worker 0 may call it (Farm).
func setMembership(seg *shm.Segment, m Membership) {
	seg.Hosts().StoreFarm([shm.FarmWords]uint64{
		uint64(m.Index) | uint64(m.Nodes)<<16 | uint64(m.PrevIndex)<<32 | uint64(m.PrevNodes)<<48,
		uint64(m.SinceMs), uint64(m.GraceMs), uint64(m.RoundMs), uint64(m.ClockOffsetMs),
	})
}
