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
	GraceMs              int64  // how long a share that grew waits before it is used, at most (kept in 32 bits)
	RoundMs              int64  // the period at which a limit that does not divide evenly rotates its remainder (32 bits)
	ClockOffsetMs        int64  // the cluster's clock (the database's) minus this node's
	// Adopted is true when worker 0 says which round the node's takes use (Round), rather than
	// each take reading it from its clock; Settled, once every live node confirmed the division
	// of the current membership in round SettledRound (farmnode.go): a share under it needs no
	// grace. PrevSettled instead says SettledRound is the last round of the membership before
	// (PrevIndex, PrevNodes) that was settled. Round is kept in 32 bits, SettledRound in 31.
	Adopted, Settled, PrevSettled bool
	Round, SettledRound           int64
	// Host is the farm's shares entry of the one host a reader asked for (membershipOfHost;
	// MembershipOf leaves it zero): under a division that follows the nodes' demand, the node's
	// share of that host in SettledRound and in the round after, in place of the equal ones.
	Host HostShares
}

// HostShares is the node's share of one host under the last settled division (AtSettled,
// round SettledRound of the membership Settled or PrevSettled names) and under the division of
// the round after (AfterSettled), when either follows the nodes' demand (farm.go). Known is
// false for a host with no entry: its shares are the equal division's.
type HostShares struct {
	Known                   bool
	AtSettled, AfterSettled int
}

// word packs s as the farm shares' entry holds it (docs/shm-format.md).
func (s HostShares) word() uint64 {
	return uint64(uint16(s.AtSettled)) | uint64(uint16(s.AfterSettled))<<16
}

// membershipOfHost is MembershipOf with the farm's shares of the host whose hash is hash, read
// together with the farm words (one writing of worker 0's).
func membershipOfHost(seg *shm.Segment, hash uint64) Membership {
	w, share, found := seg.Hosts().LoadFarmShare(hash)
	m := decodeMembership(w)
	if found {
		m.Host = HostShares{Known: true, AtSettled: int(uint16(share)), AfterSettled: int(uint16(share >> 16))}
	}
	return m
}

// prevSettledBit marks the settled round of the farmRounds word as the membership before's.
const prevSettledBit = 1 << 31

// MembershipOf reads the node's membership from the segment. Any process may call it; it
// never blocks (a read that cannot copy the words whole is "no farm").
func MembershipOf(seg *shm.Segment) Membership {
	return decodeMembership(seg.Hosts().LoadFarm())
}

func decodeMembership(w [shm.FarmWords]uint64) Membership {
	m := Membership{
		Index: uint16(w[0]), Nodes: uint16(w[0] >> 16), PrevIndex: uint16(w[0] >> 32), PrevNodes: uint16(w[0] >> 48),
		SinceMs: int64(w[1]), GraceMs: int64(uint32(w[2])), RoundMs: int64(w[2] >> 32), ClockOffsetMs: int64(w[4]),
	}
	if r := uint32(w[3] >> 32); r != 0 {
		m.Adopted, m.Round = true, int64(r-1)
	}
	if r := uint32(w[3]) &^ prevSettledBit; r != 0 {
		m.SettledRound = int64(r - 1)
		m.Settled, m.PrevSettled = uint32(w[3])&prevSettledBit == 0, uint32(w[3])&prevSettledBit != 0
	}
	return m
}

// setMembership writes m to the segment's farm words, and frees the farm's shares. Only
// worker 0 may call it (Farm).
func setMembership(seg *shm.Segment, m Membership) {
	setMembershipShares(seg, m, nil, nil)
}

// setMembershipShares writes m to the segment's farm words and the farm's shares of hosts
// (hashes[i]'s shares[i]) with them, in one writing. Only worker 0 may call it (Farm).
func setMembershipShares(seg *shm.Segment, m Membership, hashes []uint64, shares []HostShares) {
	rs := uint64(0)
	if m.Adopted {
		rs |= uint64(uint32(m.Round+1)) << 32
	}
	if m.Settled || m.PrevSettled {
		rs |= uint64(uint32(m.SettledRound+1) &^ prevSettledBit)
	}
	if m.PrevSettled && !m.Settled {
		rs |= prevSettledBit
	}
	words := make([]uint64, len(shares))
	for i, s := range shares {
		words[i] = s.word()
	}
	seg.Hosts().StoreFarmShares([shm.FarmWords]uint64{
		uint64(m.Index) | uint64(m.Nodes)<<16 | uint64(m.PrevIndex)<<32 | uint64(m.PrevNodes)<<48,
		uint64(m.SinceMs), uint64(uint32(m.GraceMs)) | uint64(uint32(m.RoundMs))<<32, rs, uint64(m.ClockOffsetMs),
	}, hashes, words)
}
