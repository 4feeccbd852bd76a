package hosts

import (
	"context"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Farm is worker 0's half of the farm: it keeps the node's membership in the segment's farm
// words (Members, called at each cluster tick), confirms each division of the hosts' limits
// through a ConfirmBoard and settles it once every live node has (Confirm), and exchanges
// refusals' pauses with the other nodes through a PauseBoard (a service: Start, Stop), so that
// a pause one node sees holds every node back within a tick. Build it with NewFarm.
type Farm struct {
	startstop.BaseStartStop
	opts FarmOptions

	mu      sync.Mutex
	pending map[string]boardPause // pauses seen here, not yet on the board
	nudge   chan struct{}

	// The division this node uses, as Members last saw it (under mu): the node's id, the live
	// nodes' ids and their MembersID, and when its takes began to use it (local ms, after the
	// farm words were written). confirmed is the last division this node confirmed.
	me         string
	live       []string
	membersID  int64
	adoptedMs  int64
	confirmed  division
	confirming bool          // a confirmation exchange is running (Exchange is not reentrant for it)
	confirmNow chan struct{} // Members saw a new division
	// lastMembersMs is when Members was last called (local ms; 0: never); roundSinceMs, when
	// the node's takes began to use the round in the farm words (Confirm).
	lastMembersMs, roundSinceMs int64

	// The divisions that follow demand (demand.go), under mu. demand is the node's rows due
	// per host as the sweep last counted them (its busiest hosts); confirmedDemand the demand
	// it published with confirmed, frozen while it confirms that division, and prev and
	// prevDemand the division it confirmed before. using is the division the node's takes
	// use now (its round in the farm words); atSettled and afterSettled the shares of the last
	// settled division and of the round after it, which the farm's shares in the segment
	// carry (tableHashes, tableShares) while the farm words name a settled round.
	demand, confirmedDemand, prevDemand map[string]int
	prev                                division
	using                               division
	atSettled, afterSettled             demandDivision
	tableHashes                         []uint64
	tableShares                         []HostShares
	// othersAhead is the furthest round a live node of this membership confirmed past this
	// node's, at its last read (−1: none).
	othersAhead int64
	// roundFloor is the least round this membership's equal division may use: past every
	// round a live node confirmed a division that follows demand in (Confirm).
	roundFloor int64
	// earlier is every other node's confirmations as this node first read them once it had
	// published under the membership it uses (earlierFor: its adoptedMs then; 0: not read
	// yet). A confirmation counts only for the membership it was made in: until a node's row
	// changes from what it was then, its confirmation before counts for nothing here (settle),
	// since the node may have moved on from it on the word of this node's confirmations from
	// before its membership began, which the others read until this node withdrew them.
	earlier    map[string]claims
	earlierFor int64
	// behind is told when this node's membership misses a node heard from within a tick
	// (OnMembersBehind); nil: nobody is.
	behind func()
}

// OnMembersBehind sets what the farm tells when the confirmations it reads show a node that
// its membership does not count although it was heard from within a tick: a node that joined
// since the membership's last tick (cluster.Member.Nudge reads the cluster again at once).
// Until every live node counts the same nodes, no division settles.
func (f *Farm) OnMembersBehind(fn func()) {
	f.mu.Lock()
	f.behind = fn
	f.mu.Unlock()
}

// claims is what a node's row says it confirmed: its last confirmation and the one before.
type claims struct{ last, before division }

func claimsOf(r store.FarmConfirm) claims {
	return claims{last: division{members: r.Members, round: r.Round, basis: r.Basis},
		before: division{members: r.PrevMembers, round: r.PrevRound, basis: r.PrevBasis}}
}

// division names one division of the hosts' limits: a membership (MembersID of its live
// nodes), a round, and the demand it follows (basis: a hash of the demands it was computed
// from, demand.go; 0: the equal division). round −1: none.
type division struct {
	members int64
	round   int64
	basis   int64
}

// FarmOptions wires a Farm.
type FarmOptions struct {
	Seg     *shm.Segment
	Tracker *Tracker   // adopts the other nodes' pauses into the host table
	Board   PauseBoard // the cluster's pauses (store/pgstore/pgcluster)
	// Grace is how long a share that grew waits for a node that cannot confirm: longer than a
	// render lasts plus a tick, plus the clocks' margin (FarmGrace). Round is the period a
	// remainder rotates at (FarmConfirmedRound with Confirms, else FarmRound).
	Grace, Round time.Duration
	// Tick is the period the board is read at (the cluster's tick): the bound on how late a
	// pause reaches this node.
	Tick time.Duration
	// Confirms, when set, is where the nodes confirm each division (store/pgstore/pgcluster): a share
	// grows as soon as every live node confirmed the division now, not a grace later. nil:
	// every share that grows waits its grace.
	Confirms ConfirmBoard
	// LeaseTTL is cluster.lease_ttl: a node not seen for it is not live, and grants nothing a
	// TTL after its last heartbeat; with a grace more, its renders have ended too.
	LeaseTTL time.Duration
	// Max is a host's configured maximum of renders in flight (Limits.Max): the limit a
	// division that follows demand divides. Every node must have the same. nil: every division
	// is the equal one.
	Max func(site []byte) int
	Now func() time.Time
	Log zerolog.Logger
}

// ConfirmBoard is the cluster's record of each node's confirmation, on its clock (ms):
// store/pgstore/pgcluster keeps one row per node in the database.
type ConfirmBoard interface {
	// PublishConfirm records what c.Node confirms (store.FarmConfirm): every render it has in
	// flight fits its share of every host under the division of c.Members (MembersID) in
	// c.Round (−1: no division yet) on c.Basis, with its demand when it first confirmed it.
	PublishConfirm(ctx context.Context, c store.FarmConfirm) error
	// ReadConfirms returns every node's last confirmation, with AtMs the last time the node
	// was heard from (its confirmation or its heartbeat, the later), and the cluster's clock
	// now.
	ReadConfirms(ctx context.Context) (confirms []store.FarmConfirm, nowMs int64, err error)
}

// MembersID identifies a membership, the live nodes' ids in any order: every node that reads
// the same live nodes computes the same one.
func MembersID(live []string) int64 {
	h := fnv.New64a()
	for _, id := range slices.Sorted(slices.Values(live)) {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return int64(h.Sum64() >> 1)
}

// PauseBoard is the cluster's record of pauses, on its clock (ms): store/pgstore/pgcluster keeps it in
// the database.
type PauseBoard interface {
	// PublishPauses records that each host is paused until untilMs (answered with status); a
	// host already paused later keeps its later pause.
	PublishPauses(ctx context.Context, hosts []string, untilMs []int64, status []int32) error
	// ReadPauses returns every pause that has not ended, and the cluster's clock now.
	ReadPauses(ctx context.Context) (hosts []string, untilMs []int64, status []int32, nowMs int64, err error)
}

type boardPause struct {
	untilMs int64 // this node's clock
	status  int32
}

// FarmGrace is the grace for renders that last at most renderTimeout on a cluster that ticks
// every tick: a render granted under the division before a change ends within renderTimeout,
// every node has seen the change within a tick, and a second covers the clocks' disagreement
// after each corrected its own by the database's.
func FarmGrace(renderTimeout, tick time.Duration) time.Duration {
	return renderTimeout + tick + time.Second
}

// FarmRound is the period at which a remainder rotates: four graces, so that at most one
// round begins within any grace, and a share that moves idles at most a quarter of a round.
func FarmRound(grace time.Duration) time.Duration { return 4 * grace }

// NewFarm returns a Farm. Every option is required. Until its first Members, a segment that
// had no membership holds no share of any host (a restarted worker 0 finds the one its
// predecessor wrote, and keeps it).
func NewFarm(opts FarmOptions) *Farm {
	if MembershipOf(opts.Seg).Nodes == 0 {
		setMembership(opts.Seg, Membership{Nodes: FarmNone, PrevNodes: FarmNone})
	}
	f := &Farm{opts: opts, pending: map[string]boardPause{}, nudge: make(chan struct{}, 1),
		confirmNow: make(chan struct{}, 1), confirmed: division{round: -1}, prev: division{round: -1}}
	registerDemandSink(opts.Seg, f)
	return f
}

// Members records the node's membership at a cluster tick: live are the live nodes' ids (me
// among them unless it is stopping), clusterNow the database's clock when it read them. A
// node that joins a farm of others holds no share of any host until the division is settled
// (a grace at most), and neither does one whose membership changed twice within a grace, nor
// one not heard from for half a lease TTL (the others may have divided its share). Without
// Confirms, a node alone at its first tick holds every host's whole limit at once; with them,
// once it confirmed and no node gone lately may still render.
func (f *Farm) Members(me string, live []string, clusterNow time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.opts
	now := o.Now().UnixMilli()
	sorted := slices.Sorted(slices.Values(live))
	index, nodes := uint16(0), uint16(FarmNone)
	if i := slices.Index(sorted, me); i >= 0 && len(sorted) < FarmNone {
		index, nodes = uint16(i), uint16(len(sorted))
	}
	// A node whose ticks stopped for half a lease TTL (paused, starved) may have been counted
	// gone by the others meanwhile, though its membership reads the same when it comes back.
	stale := f.lastMembersMs != 0 && now-f.lastMembersMs >= max(o.LeaseTTL/2, 2*o.Tick).Milliseconds()
	f.lastMembersMs = now
	cur := MembershipOf(o.Seg)
	next := cur
	next.GraceMs, next.RoundMs = o.Grace.Milliseconds(), max(o.Round.Milliseconds(), 1)
	next.ClockOffsetMs = clusterNow.UnixMilli() - now
	switch {
	case cur.SinceMs == 0: // this segment's first membership
		next.Index, next.Nodes, next.SinceMs = index, nodes, now
		next.PrevIndex, next.PrevNodes = 0, FarmNone
		if nodes == 1 && o.Confirms == nil {
			next.PrevNodes = 1
		}
	case index != cur.Index || nodes != cur.Nodes || stale:
		next.PrevIndex, next.PrevNodes = cur.Index, cur.Nodes
		if now-cur.SinceMs < next.GraceMs || stale {
			// The last change is still in its grace; or this node was not heard from for so
			// long that the others may have counted it gone and divided its share among
			// themselves: the membership it held before is not one it may count on.
			next.PrevIndex, next.PrevNodes = 0, FarmNone
		}
		next.Index, next.Nodes, next.SinceMs = index, nodes, now
		// The round the membership before was last settled in bounds what its nodes, gone
		// ones included, may still have in flight (farmShare), with the farm's shares of it.
		next.Settled, next.PrevSettled = false, cur.Settled && next.PrevNodes != FarmNone
		if !next.PrevSettled {
			next.SettledRound = 0
		}
		f.atSettled, f.afterSettled = demandDivision{}, demandDivision{}
		o.Log.Info().Int("index", int(index)).Int("nodes", int(nodes)).Int("was_index", int(cur.Index)).
			Int("was_nodes", int(cur.Nodes)).Msg("farm: the division of the hosts' limits changed")
	}
	if next != cur {
		f.store(next)
	}
	if id := MembersID(sorted); f.me != me || f.membersID != id || next.SinceMs != cur.SinceMs {
		// Every take from now on reads the new words: one that read the old ones took its now
		// before this (a millisecond later, to be sure).
		f.me, f.live, f.membersID, f.adoptedMs = me, sorted, id, o.Now().UnixMilli()+1
		f.using, f.roundFloor = division{round: -1}, 0
		// A confirmation counts only for the membership it was made in. This node's from
		// before are withdrawn (its next row confirms nothing until it confirms a division of
		// this one): the same nodes may form the same membership again (the same MembersID)
		// while this node goes to another division of it (the clock's round, behind the one
		// it had confirmed), and the others would read the one it kept as its confirmation
		// before as this node holding to a division it no longer does. The others' rows as it
		// reads them next may hold confirmations made before this membership (earlier, settle).
		f.confirmed, f.confirmedDemand = division{round: -1}, nil
		f.prev, f.prevDemand = division{round: -1}, nil
		f.earlier, f.earlierFor = nil, 0
		if next.Settled {
			// It was another membership's (the same ranks, other nodes): it bounds the shares
			// for a grace, as a membership before does.
			f.store(unsettle(next, now))
			f.atSettled, f.afterSettled = demandDivision{}, demandDivision{}
		}
		select { // confirm it now, not at the next tick
		case f.confirmNow <- struct{}{}:
		default:
		}
	}
}

// Paused is told of a pause this node's Tracker set (Tracker.OnPause): it goes on the board at
// once, not at the next tick.
func (f *Farm) Paused(host string, untilMs int64, status int) {
	f.mu.Lock()
	if p, ok := f.pending[host]; !ok || untilMs > p.untilMs {
		f.pending[host] = boardPause{untilMs: untilMs, status: int32(status)}
	}
	f.mu.Unlock()
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// Start runs the exchange until Stop: what this node saw goes on the board as soon as it is
// seen, and the board is read every tick.
func (f *Farm) Start(ctx context.Context) error {
	ctx, start, done := f.StartInit(ctx)
	if !start {
		return nil
	}
	go func() {
		defer done()
		t := time.NewTicker(f.opts.Tick)
		defer t.Stop()
		c := time.NewTimer(f.confirmWait())
		defer c.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.nudge:
				f.publish(ctx)
			case <-f.confirmNow:
				f.Confirm(ctx)
			case <-c.C:
				f.Confirm(ctx)
			case <-t.C:
				f.Exchange(ctx)
			}
			c.Reset(f.confirmWait())
		}
	}()
	return nil
}

// ConfirmPoll is how often a node exchanges confirmations while its division is not settled
// (a membership or a round changed): a handover costs the renders in flight on the node that
// gives a share up and about two of these, not a tick or a grace.
const ConfirmPoll = 100 * time.Millisecond

// confirmWait is how long the farm waits before its next confirmation: ConfirmPoll while the
// division it uses is not settled or follows demand, else until the next round begins (a tick
// at most).
func (f *Farm) confirmWait() time.Duration {
	o := f.opts
	if o.Confirms == nil {
		return o.Tick
	}
	farm := MembershipOf(o.Seg)
	if farm.Nodes == 0 || !farm.Adopted || !farm.Settled || farm.SettledRound != farm.Round {
		return ConfirmPoll
	}
	f.mu.Lock()
	early := f.moveEarly(farm)
	// While the division follows demand, another node may move on to the next one at any
	// moment (its demand changed): each node's growth waits until every node confirmed that,
	// so each looks every poll, not at its next tick.
	following := f.atSettled.basis != 0 || f.afterSettled.basis != 0
	f.mu.Unlock()
	if early || following {
		return ConfirmPoll
	}
	roundMs := max(farm.RoundMs, 1)
	next := (farm.Round+1)*roundMs - farm.ClockOffsetMs - o.Now().UnixMilli()
	return min(o.Tick, max(time.Duration(next)*time.Millisecond, time.Millisecond))
}

// FarmConfirmedRound is the period at which a remainder rotates when the nodes confirm each
// division (FarmOptions.Confirms): a handover then costs the renders in flight on the node
// that gives the share up and a confirmation's round trip, not a grace, so the remainder may
// move every two ticks, and the rows of a node that holds none of a host wait that long at
// most while every node is live.
func FarmConfirmedRound(tick time.Duration) time.Duration { return 2 * tick }

// Exchange is one round: publish what this node saw, then adopt every pause on the board;
// then confirm the division this node uses, and settle it if every live node has.
func (f *Farm) Exchange(ctx context.Context) {
	f.publish(ctx)
	o := f.opts
	hosts, until, status, _, err := o.Board.ReadPauses(ctx)
	if err != nil {
		o.Log.Warn().Err(err).Msg("farm: reading the cluster's pauses failed")
	} else {
		offset := MembershipOf(o.Seg).ClockOffsetMs
		now := o.Now().UnixMilli()
		for i, h := range hosts {
			o.Tracker.Adopt(h, until[i]-offset, int(status[i]), now)
		}
	}
	f.Confirm(ctx)
}

// Confirm is the confirmation's round, at each tick: this node confirms the division it uses
// (the membership Members last saw, its round, and the demand the division follows) once none
// of its renders in flight was begun before it used that division but those that fit its share
// under it (fitting), since every render begun since was granted under a limit no greater than
// its share under it; it publishes the last division it confirmed, with its demand then, and
// its renders in flight; then it reads every node's. The division is settled (written to the farm words: every share under it holds at
// once) when every live node confirmed it and every node not live was last heard from long
// enough ago that it grants nothing and its renders have ended (LeaseTTL + Grace); otherwise
// the farm words say it is not, and shares that grow wait their grace.
//
// Under a settled division of round S, the node uses round S+1 once the cluster's clock is
// there, divided by the demand every node published with its confirmation of S (demand.go):
// every node that saw S settled computes the same division from the same frozen rows. A node
// that finds a live node confirming neither S nor that division (restarted, or it read other
// rows) lets the settled division go as a membership before: it bounds the shares for a grace,
// and the nodes settle the equal division of the clock's round again.
func (f *Farm) Confirm(ctx context.Context) {
	o := f.opts
	if o.Confirms == nil {
		return
	}
	f.mu.Lock()
	if f.me == "" || f.confirming {
		f.mu.Unlock()
		return
	}
	f.confirming = true
	me, live, id, adopted := f.me, f.live, f.membersID, f.adoptedMs
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.confirming = false
		f.mu.Unlock()
	}()

	farm, want, since, now := f.adopt(id, adopted)
	before, inFlight := o.Seg.Leases().HostRendersBefore(since, now)
	if before > 0 {
		before -= f.fitting(want, since, now)
	}
	in := farm.Nodes != FarmNone && slices.Contains(live, me)
	f.mu.Lock()
	if in && before == 0 && f.membersID == id && f.adoptedMs == adopted && f.confirmed != want {
		f.prev, f.prevDemand = f.confirmed, f.confirmedDemand
		f.confirmed, f.confirmedDemand = want, f.demand
	}
	mine := store.FarmConfirm{Node: me, Members: f.confirmed.members, Round: f.confirmed.round, Basis: f.confirmed.basis,
		Demand: f.confirmedDemand, PrevMembers: f.prev.members, PrevRound: f.prev.round, PrevBasis: f.prev.basis,
		PrevDemand: f.prevDemand, InFlight: inFlight}
	f.mu.Unlock()
	if err := o.Confirms.PublishConfirm(ctx, mine); err != nil {
		o.Log.Warn().Err(err).Msg("farm: publishing this node's confirmation failed")
		return
	}
	rows, dbNow, err := o.Confirms.ReadConfirms(ctx)
	if err != nil {
		o.Log.Warn().Err(err).Msg("farm: reading the nodes' confirmations failed")
		return
	}
	f.tellIfBehind(rows, dbNow, me, live)
	f.settle(rows, dbNow, now, in, me, live, adopted, want)
}

// tellIfBehind tells OnMembersBehind's function when rows show a node that live misses but
// that was heard from within a tick (a node that joined since the membership's last read).
func (f *Farm) tellIfBehind(rows []store.FarmConfirm, dbNow int64, me string, live []string) {
	f.mu.Lock()
	behind := f.behind
	f.mu.Unlock()
	if behind == nil {
		return
	}
	for _, r := range rows {
		if r.Node != me && !slices.Contains(live, r.Node) && r.AtMs > dbNow-f.opts.Tick.Milliseconds() {
			behind()
			return
		}
	}
}

// fitting counts the node's renders in flight begun before since (when its takes began to use
// want) that fit its share under want: those of a host want follows the demand of (demand.go)
// that hold one of its first share tokens. Every take since holds a token below its share
// (AdmitToken tries only those), so once each render of before since fits too, the node's
// renders of each host never outnumber its share under want: it may confirm want without
// waiting for them to end. A render of another host counts as not fitting (the equal
// division's hosts are not listed), and the node waits for it to end.
func (f *Farm) fitting(want division, since, now int64) int {
	if want.basis == 0 {
		return 0
	}
	f.mu.Lock()
	var d demandDivision
	for _, k := range []demandDivision{f.afterSettled, f.atSettled} {
		if k.round == want.round && k.basis == want.basis {
			d = k
		}
	}
	f.mu.Unlock()
	leases, n := f.opts.Seg.Leases(), 0
	for hash, mine := range d.mine {
		for i := range min(mine, MaxTokens) {
			info, held := leases.Lookup(token(hash, i), now)
			if held && !info.Released && info.Holder&shm.HostSlotMark != 0 && info.AcquiredAtMs < since {
				n++
			}
		}
	}
	return n
}

// adopt moves the node's takes to the division of the cluster's clock, if they are not there:
// from then on (a millisecond later, as for a membership) every take holds its share under
// it. It returns the farm words, the division the node uses (want), since when its takes have
// used it, and the node's clock now.
func (f *Farm) adopt(id, adopted int64) (farm Membership, want division, since, now int64) {
	o := f.opts
	f.mu.Lock()
	defer f.mu.Unlock()
	farm = MembershipOf(o.Seg)
	now = o.Now().UnixMilli()
	round := floorDiv(now+farm.ClockOffsetMs, max(farm.RoundMs, 1))
	if !farm.Settled {
		// No round a node of this membership confirmed a division that follows demand in is
		// used again for the equal one: a node publishes its demand with the first
		// confirmation of a division, and the nodes that divided by it must read the same.
		// Nor does the node go back to a round before the one it uses in this membership
		// when its clock's correction steps back across a round's start: it may have
		// confirmed the later one, which its row keeps as its confirmation before, and the
		// others would count that as this node holding to it while it grants under the
		// earlier one.
		round = max(round, f.roundFloor)
		if f.using.members == id {
			round = max(round, f.using.round)
		}
	}
	want = division{members: id, round: round}
	if farm.Settled && farm.Adopted {
		// Under a settled membership the node moves one round past the last settled at most:
		// a node that dies then holds at most its share of one of those two (farmShare). A
		// clock that steps back does not move it back. When the demand moved the next
		// round's division away from the settled one, or this node's demand moved from what
		// it published, or another node moved on for either, it moves there at once, ahead of
		// the clock: what the nodes need changes now, and the round after divides by the
		// demands published with the next one.
		target := min(round, farm.SettledRound+1)
		if f.moveEarly(farm) {
			target = farm.SettledRound + 1
		}
		round = max(farm.Round, target)
		want = division{members: id, round: round}
		switch round {
		case f.atSettled.round:
			want.basis = f.atSettled.basis
		case f.afterSettled.round:
			want.basis = f.afterSettled.basis
		}
	}
	if f.membersID == id && f.adoptedMs == adopted && (!farm.Adopted || farm.Round != round || f.using != want) {
		farm.Adopted, farm.Round = true, round
		f.store(farm)
		f.using = want
		f.roundSinceMs = o.Now().UnixMilli() + 1
	}
	return farm, want, max(adopted, f.roundSinceMs), now
}

// settle reads the nodes' confirmations (rows, on the database's clock dbNow): the division
// the node uses (want) is settled when every live node confirmed it and no node gone lately
// may still render (in: this node is among the live ones); a live node that moved on to
// another next division lets the settled one go.
func (f *Farm) settle(rows []store.FarmConfirm, dbNow, now int64, in bool, me string, live []string, adopted int64, want division) {
	o := f.opts
	id, round := want.members, want.round
	f.mu.Lock()
	if f.membersID != id || f.adoptedMs != adopted || f.using != want {
		f.mu.Unlock()
		return // the division changed meanwhile: this was about the one before
	}
	if f.earlierFor != adopted {
		// The first read since this node published under its membership: every other row
		// may still hold confirmations made before it began. Its own holds none (Members
		// withdrew them).
		f.earlier, f.earlierFor = map[string]claims{}, adopted
		for _, r := range rows {
			if r.Node != me {
				f.earlier[r.Node] = claimsOf(r)
			}
		}
	}
	earlier := f.earlier
	f.mu.Unlock()
	settled := in
	confirmedBy := 0
	ahead := int64(-1)
	for _, r := range rows {
		if slices.Contains(live, r.Node) && r.Members == id && r.Round > round {
			ahead = max(ahead, r.Round)
		}
		switch {
		case slices.Contains(live, r.Node):
			if was, ok := earlier[r.Node]; ok && was == claimsOf(r) {
				// As this node first read it under its membership: the node holds to its last
				// confirmation, but it may have moved on from the one before on the word of
				// this node's own from before its membership began, read before this node
				// withdrew them. That one counts once the node confirmed another.
				if was.last == want {
					confirmedBy++
				}
				break
			}
			if confirms(r, want) {
				confirmedBy++
			}
		case r.AtMs+(o.LeaseTTL+o.Grace).Milliseconds() > dbNow:
			settled = false // a node gone lately: its renders may not have ended
		}
	}
	settled = settled && confirmedBy == len(live)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.membersID != id || f.adoptedMs != adopted || f.using != want {
		return // the division changed meanwhile: this was about the one before
	}
	f.othersAhead = ahead
	for _, r := range rows {
		if !slices.Contains(live, r.Node) {
			continue
		}
		if r.Members == id && r.Basis != 0 {
			f.roundFloor = max(f.roundFloor, r.Round+1)
		}
		if r.PrevMembers == id && r.PrevBasis != 0 {
			f.roundFloor = max(f.roundFloor, r.PrevRound+1)
		}
	}
	cur := MembershipOf(o.Seg)
	next := cur
	switch {
	case settled && !(cur.Settled && cur.SettledRound == round):
		next.Settled, next.PrevSettled, next.SettledRound = true, false, round
		// The division settled is the one every node confirmed (want); the next round's
		// follows the demand they published with it.
		f.atSettled = f.divisionOf(want, rows, live, me)
		f.afterSettled = f.nextDivision(want, rows, live, me)
		f.setTable(next)
		o.Log.Info().Int("index", int(cur.Index)).Int("nodes", int(cur.Nodes)).Int64("round", round).
			Int64("next_basis", f.afterSettled.basis).Int("demand_hosts", len(f.afterSettled.mine)).
			Msg("farm: every live node confirmed the division of the hosts' limits")
	case !settled && cur.Settled && f.strayed(rows, live, id, cur.SettledRound):
		// A live node confirms neither the division settled nor the next one (it restarted
		// under its id, or computed another): the settled division bounds the shares for a
		// grace, and the nodes settle the equal division again.
		next = unsettle(cur, now)
		f.atSettled, f.afterSettled = demandDivision{}, demandDivision{}
		o.Log.Info().Int64("round", cur.SettledRound).Msg("farm: a live node no longer confirms the settled division; it bounds the shares for a grace")
	}
	if next != cur {
		f.store(next)
	}
}

// confirms reports whether r confirmed d: as its last confirmation, or the one before (a node
// that moved on to the next round confirmed this one on its way).
func confirms(r store.FarmConfirm, d division) bool {
	return r.Members == d.members && r.Round == d.round && r.Basis == d.basis ||
		r.PrevMembers == d.members && r.PrevRound == d.round && r.PrevBasis == d.basis
}

// strayed reports whether a live node's confirmations name neither the division settled in
// round settledRound nor the one of the round after.
func (f *Farm) strayed(rows []store.FarmConfirm, live []string, id, settledRound int64) bool {
	ok := []division{{members: id, round: settledRound, basis: f.atSettled.basis}, {members: id, round: settledRound + 1, basis: f.afterSettled.basis}}
	if f.atSettled.round != settledRound {
		return false // this node did not see the round settled itself (a restarted worker 0)
	}
	for _, n := range live {
		// The node's last confirmation, not the one before: a node that moved on to another
		// next division than this node's confirmed the settled one on its way, and would
		// hold every node back for ever.
		i := slices.IndexFunc(rows, func(r store.FarmConfirm) bool { return r.Node == n })
		if i < 0 || !slices.Contains(ok, division{members: rows[i].Members, round: rows[i].Round, basis: rows[i].Basis}) {
			return true
		}
	}
	return false
}

// unsettle lets the settled division of m go: it becomes the membership before (the same
// ranks), which bounds every share for a grace from now, with the farm's shares of it.
func unsettle(m Membership, nowMs int64) Membership {
	if !m.Settled {
		return m
	}
	m.PrevIndex, m.PrevNodes, m.PrevSettled, m.Settled, m.SinceMs = m.Index, m.Nodes, true, false, nowMs
	return m
}

// store writes m to the farm words, with the farm's shares while m names a settled round (of
// its membership or the one before) and none otherwise. Under mu, or before the farm runs.
func (f *Farm) store(m Membership) {
	if !m.Settled && !m.PrevSettled {
		f.tableHashes, f.tableShares = nil, nil
	}
	setMembershipShares(f.opts.Seg, m, f.tableHashes, f.tableShares)
}

func (f *Farm) publish(ctx context.Context) {
	f.mu.Lock()
	pending := f.pending
	f.pending = map[string]boardPause{}
	f.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	o := f.opts
	offset := MembershipOf(o.Seg).ClockOffsetMs
	hosts := make([]string, 0, len(pending))
	until := make([]int64, 0, len(pending))
	status := make([]int32, 0, len(pending))
	for h, p := range pending {
		hosts, until, status = append(hosts, h), append(until, p.untilMs+offset), append(status, p.status)
	}
	if err := o.Board.PublishPauses(ctx, hosts, until, status); err != nil {
		o.Log.Warn().Err(err).Int("hosts", len(hosts)).Msg("farm: publishing pauses failed; the other nodes learn of them at the next")
		f.mu.Lock()
		for h, p := range pending {
			if q, ok := f.pending[h]; !ok || p.untilMs > q.untilMs {
				f.pending[h] = p
			}
		}
		f.mu.Unlock()
	}
}
