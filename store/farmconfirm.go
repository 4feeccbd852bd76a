package store

// FarmConfirm is one node's confirmation of the division of the hosts' limits, as the
// cluster's engine keeps it (one record per node, package hosts' Farm writes and reads them):
// every render the node has in flight fits its share of every host under division (Members,
// Round, Basis), and Demand is the node's rows due per host when it first confirmed it (its
// busiest hosts), from which the division of the round after is computed. Prev* is the
// division the node confirmed before this one, kept so that a node that reads late still
// sees what every node confirmed for a round. Members is a hash of the live nodes' ids;
// Round −1 means none; Basis 0 is the equal division. AtMs is the later of the record's time
// and the node's last heartbeat, on the database's clock.
type FarmConfirm struct {
	Node                              string
	Members, Round, Basis             int64
	Demand                            map[string]int
	PrevMembers, PrevRound, PrevBasis int64
	PrevDemand                        map[string]int
	InFlight                          int
	AtMs                              int64
}
