package hosts

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// TestSettledDivisionNeedsNoGrace: a node that joined others a moment ago holds no share of a
// host while the new division is unconfirmed (a grace at most), and its whole share of the
// three-node division as soon as every live node confirmed it for the round now; a division
// settled in an earlier round still holds that round's share and the one before, not the
// previous membership's.
func TestSettledDivisionNeedsNoGrace(t *testing.T) {
	const (
		now   = int64(1_800_000_000_000)
		grace = int64(63_500)
		round = int64(254_000)
	)
	r := floorDiv(now, round)
	joined := Membership{Index: 2, Nodes: 3, PrevIndex: 0, PrevNodes: FarmNone, SinceMs: now - 100,
		GraceMs: grace, RoundMs: round}
	if n, _ := farmShare(joined, 3, 7, now); n != 0 {
		t.Fatalf("unconfirmed: a joiner holds %d of 3 within its grace, want 0", n)
	}
	joined.Settled, joined.SettledRound = true, r
	if n, _ := farmShare(joined, 3, 7, now); n != 1 {
		t.Fatalf("settled this round: a joiner holds %d of 3, want 1", n)
	}
	// Limit 2 among 3: the remainder's place moves with the round. Settled a round earlier,
	// the node holds the least of the two rounds' shares, and no longer the joiner's 0.
	var h uint64
	for h = 0; ; h++ {
		if share(2, h, 2, 3, r) == 1 && share(2, h, 2, 3, r-1) == 1 {
			break
		}
	}
	joined.SettledRound = r - 1
	if n, _ := farmShare(joined, 2, h, now); n != 1 {
		t.Fatalf("settled a round earlier, the same share in both rounds: %d, want 1", n)
	}
	for h = 0; ; h++ {
		if share(2, h, 2, 3, r) == 1 && share(2, h, 2, 3, r-1) == 0 {
			break
		}
	}
	if n, _ := farmShare(joined, 2, h, now); n != 0 {
		t.Fatalf("settled a round earlier, a share the new round grows: %d before the round is confirmed, want 0", n)
	}
	joined.SettledRound = r
	if n, _ := farmShare(joined, 2, h, now); n != 1 {
		t.Fatalf("the new round confirmed: %d, want 1", n)
	}
}

// memConfirms is a ConfirmBoard in memory on the database's clock *now, with each node's
// heartbeat (the cluster's record) beside its confirmation.
type memConfirms struct {
	now  *int64
	rows map[string]store.FarmConfirm
	beat map[string]int64
}

func (m *memConfirms) PublishConfirm(_ context.Context, c store.FarmConfirm) error {
	c.AtMs = *m.now
	m.rows[c.Node] = c
	return nil
}

func (m *memConfirms) ReadConfirms(context.Context) ([]store.FarmConfirm, int64, error) {
	var out []store.FarmConfirm
	for _, id := range slices.Sorted(maps.Keys(m.rows)) {
		r := m.rows[id]
		r.AtMs = max(r.AtMs, m.beat[id])
		out = append(out, r)
	}
	return out, *m.now, nil
}

// TestJoinerRendersOnceEveryNodeConfirmed: with the defaults (render.timeout 60 s, a tick of
// 2.5 s, a lease TTL of 10 s: a grace of 63.5 s), a node that joins two others holds no share
// of a host while a render one of them began under the old division is in flight, and its
// share of the new division as soon as that render ended and every node confirmed: within
// two exchanges, not a grace. A node gone lately (its row heard from within a lease TTL and a
// grace) holds every share that would grow until then.
func TestJoinerRendersOnceEveryNodeConfirmed(t *testing.T) {
	const tick, ttl, timeout = 2500 * time.Millisecond, 10 * time.Second, 60 * time.Second
	now := t0
	board := &memConfirms{now: &now, rows: map[string]store.FarmConfirm{}, beat: map[string]int64{}}
	grace := FarmGrace(timeout, tick)
	cfg := &Limits{MaxConcurrency: 3}
	type node struct {
		id   string
		seg  *shm.Segment
		farm *Farm
	}
	mk := func(id string) *node {
		seg := memSegment(t)
		return &node{id: id, seg: seg, farm: NewFarm(FarmOptions{Seg: seg, Confirms: board, Grace: grace,
			Round: FarmConfirmedRound(tick), Tick: tick, LeaseTTL: ttl, Log: zerolog.Nop(),
			Now: func() time.Time { return time.UnixMilli(now) }})}
	}
	a, b, c := mk("node-a"), mk("node-b"), mk("node-c")
	round := func(ns []*node, live []string) {
		for _, n := range ns {
			board.beat[n.id] = now
			n.farm.Members(n.id, live, time.UnixMilli(now))
		}
		for _, n := range ns {
			n.farm.Confirm(t.Context())
		}
		for _, n := range ns {
			n.farm.Confirm(t.Context())
		}
	}
	host := []byte("shop.test")
	key := []byte("desktop|https://shop.test/p")
	round([]*node{a, b}, []string{"node-a", "node-b"})
	if al := Of(a.seg, cfg, host, now); al.Share == 0 || !MembershipOf(a.seg).Settled {
		t.Fatalf("two nodes, both confirmed: a's allowance %+v, farm %+v", al, MembershipOf(a.seg))
	}
	// a renders under the two-node division: 2 of 3 in one of the rounds, at least 1.
	tok, ok := Admit(a.seg, cfg, key, now, timeout.Milliseconds(), 1)
	if !ok {
		t.Fatal("a could not take a render slot")
	}
	now += 10
	round([]*node{a, b, c}, []string{"node-a", "node-b", "node-c"})
	if al := Of(c.seg, cfg, host, now); al.Share != 0 {
		t.Fatalf("c holds %d while a's render begun under the old division is in flight", al.Share)
	}
	now += 200
	a.seg.Leases().Release(tok, now, 0)
	round([]*node{a, b, c}, []string{"node-a", "node-b", "node-c"})
	for _, n := range []*node{a, b, c} {
		if al := Of(n.seg, cfg, host, now); al.Share != 1 {
			t.Fatalf("%s holds %d of 3 on three nodes once every node confirmed (%v after the join; the grace is %v)",
				n.id, al.Share, 210*time.Millisecond, grace)
		}
	}
	// b is killed: a and c count it gone a lease TTL later; b's row was heard from then.
	now += ttl.Milliseconds()
	round([]*node{a, c}, []string{"node-a", "node-c"})
	if f := MembershipOf(a.seg); f.Settled {
		t.Fatalf("settled while b, gone lately, may still render: %+v", f)
	}
	now = board.rows["node-b"].AtMs + (ttl + grace).Milliseconds() + 1
	round([]*node{a, c}, []string{"node-a", "node-c"})
	if f := MembershipOf(a.seg); !f.Settled {
		t.Fatalf("not settled a lease TTL and a grace after b was last heard from: %+v", f)
	}
	if sa, sc := Of(a.seg, cfg, host, now).Share, Of(c.seg, cfg, host, now).Share; sa+sc != 3 {
		t.Fatalf("two nodes left hold %d + %d of 3", sa, sc)
	}
}

// TestDivisionFollowsDemand: three nodes, a host of limit 2 whose rows are all node-b's. Once
// the division every node confirmed carried their demand, node-b holds the whole limit the
// round after and the others none (the equal division would give node-b one slot at most,
// and none in some rounds); its takes reach both slots. When node-b's demand goes to none and
// node-c's comes, the limit follows two settled rounds later, and at no moment do the three
// shares add up to more than the limit.
func TestDivisionFollowsDemand(t *testing.T) {
	const tick, ttl, timeout = 2500 * time.Millisecond, 10 * time.Second, 60 * time.Second
	now := t0
	board := &memConfirms{now: &now, rows: map[string]store.FarmConfirm{}, beat: map[string]int64{}}
	grace := FarmGrace(timeout, tick)
	cfg := &Limits{MaxConcurrency: 2}
	host := []byte("shop.test")
	type node struct {
		id   string
		seg  *shm.Segment
		farm *Farm
	}
	var ns []*node
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		seg := memSegment(t)
		ns = append(ns, &node{id: id, seg: seg, farm: NewFarm(FarmOptions{Seg: seg, Confirms: board, Grace: grace,
			Round: FarmConfirmedRound(tick), Tick: tick, LeaseTTL: ttl, Max: cfg.Max, Log: zerolog.Nop(),
			Now: func() time.Time { return time.UnixMilli(now) }})})
	}
	live := []string{"node-a", "node-b", "node-c"}
	shares := func() []int {
		var out []int
		total := 0
		for _, n := range ns {
			s := Of(n.seg, cfg, host, now).Share
			out, total = append(out, s), total+s
		}
		if total > 2 {
			t.Fatalf("at %d the shares %v add up to more than the limit 2", now-t0, out)
		}
		return out
	}
	// exchange runs the nodes' confirmations a few times, every 100 ms (ConfirmPoll).
	exchange := func() {
		for range 4 {
			for _, n := range ns {
				board.beat[n.id] = now
				n.farm.Members(n.id, live, time.UnixMilli(now))
				n.farm.Confirm(t.Context())
				shares()
			}
			now += 100
		}
	}
	ns[1].farm.ReportDemand(map[string]int{"shop.test": 40})
	roundMs := FarmConfirmedRound(tick).Milliseconds()
	// Three rounds: the first settles the equal division with the demand, the second the
	// division that follows it.
	for range 3 {
		exchange()
		now = (now/roundMs + 1) * roundMs
	}
	exchange()
	if got := shares(); got[0] != 0 || got[1] != 2 || got[2] != 0 {
		t.Fatalf("node-b has all the rows: shares %v, want [0 2 0]", got)
	}
	key := []byte("desktop|https://shop.test/p")
	var toks []shm.Lease
	for i := range 2 {
		tok, ok := Admit(ns[1].seg, cfg, key, now, timeout.Milliseconds(), uint64(i+1))
		if !ok {
			t.Fatalf("node-b could not take render slot %d of 2", i+1)
		}
		toks = append(toks, tok)
	}
	ns[1].farm.ReportDemand(map[string]int{})
	ns[2].farm.ReportDemand(map[string]int{"shop.test": 9})
	for range 3 {
		now = (now/roundMs + 1) * roundMs
		exchange()
	}
	// node-b's two renders are still in flight: node-b cannot confirm a division that gives
	// them up, so node-c holds nothing yet.
	if got := shares(); got[2] != 0 {
		t.Fatalf("node-c holds %d while node-b's two renders are in flight: %v", got[2], got)
	}
	for _, tok := range toks {
		ns[1].seg.Leases().Release(tok, now, 0)
	}
	for range 3 {
		now = (now/roundMs + 1) * roundMs
		exchange()
	}
	if got := shares(); got[0] != 0 || got[1] != 0 || got[2] != 2 {
		t.Fatalf("node-c has all the rows now: shares %v, want [0 0 2]", got)
	}
}

// TestFarmTellsWhenItsMembershipMissesANode: node-a's last tick read only itself; node-b,
// started a moment later, counts both and confirms. No division settles until node-a counts
// node-b too, so node-a's farm, reading node-b's confirmation, asks its membership to read the
// cluster now (OnMembersBehind), not at its next tick; a node gone for longer than a tick asks
// nothing.
func TestFarmTellsWhenItsMembershipMissesANode(t *testing.T) {
	const tick, ttl, timeout = 2500 * time.Millisecond, 10 * time.Second, 60 * time.Second
	now := t0
	board := &memConfirms{now: &now, rows: map[string]store.FarmConfirm{}, beat: map[string]int64{}}
	mk := func() *Farm {
		return NewFarm(FarmOptions{Seg: memSegment(t), Confirms: board, Grace: FarmGrace(timeout, tick),
			Round: FarmConfirmedRound(tick), Tick: tick, LeaseTTL: ttl, Log: zerolog.Nop(),
			Now: func() time.Time { return time.UnixMilli(now) }})
	}
	a, b := mk(), mk()
	asked := 0
	a.OnMembersBehind(func() { asked++ })
	board.beat["node-a"] = now
	a.Members("node-a", []string{"node-a"}, time.UnixMilli(now))
	a.Confirm(t.Context())
	if asked != 0 {
		t.Fatalf("node-a alone asked its membership %d times", asked)
	}
	now += 300
	board.beat["node-b"] = now
	b.Members("node-b", []string{"node-a", "node-b"}, time.UnixMilli(now))
	b.Confirm(t.Context())
	now += 100
	a.Confirm(t.Context())
	if asked == 0 {
		t.Fatal("node-a read node-b's confirmation of a membership with both and did not ask its own membership to read the cluster")
	}
	// node-b is killed; once its row is older than a tick, node-a (which still misses it)
	// asks nothing more.
	asked = 0
	now += tick.Milliseconds() + 1
	a.Confirm(t.Context())
	if asked != 0 {
		t.Fatalf("node-a asked its membership %d times about a node not heard from for a tick", asked)
	}
}

// farmTrio is three nodes' farms (node-a, node-b, node-c) on one board in memory, with the
// defaults (render.timeout 60 s, a tick of 2.5 s, a lease TTL of 10 s), a host shop.test of
// limit 2, and a clock the test moves.
type farmTrio struct {
	t     *testing.T
	now   int64
	board *memConfirms
	cfg   *Limits
	live  []string
	segs  []*shm.Segment
	farms []*Farm
}

func newFarmTrio(t *testing.T) *farmTrio {
	const tick, ttl, timeout = 2500 * time.Millisecond, 10 * time.Second, 60 * time.Second
	tr := &farmTrio{t: t, now: t0, cfg: &Limits{MaxConcurrency: 2}, live: []string{"node-a", "node-b", "node-c"}}
	tr.board = &memConfirms{now: &tr.now, rows: map[string]store.FarmConfirm{}, beat: map[string]int64{}}
	for range tr.live {
		seg := memSegment(t)
		tr.segs = append(tr.segs, seg)
		tr.farms = append(tr.farms, NewFarm(FarmOptions{Seg: seg, Confirms: tr.board, Grace: FarmGrace(timeout, tick),
			Round: FarmConfirmedRound(tick), Tick: tick, LeaseTTL: ttl, Max: tr.cfg.Max, Log: zerolog.Nop(),
			Now: func() time.Time { return time.UnixMilli(tr.now) }}))
	}
	return tr
}

// shares is each node's share of shop.test now.
func (tr *farmTrio) shares() []int {
	var out []int
	for _, seg := range tr.segs {
		out = append(out, Of(seg, tr.cfg, []byte("shop.test"), tr.now).Share)
	}
	return out
}

// exchange runs rounds of the nodes' confirmations, every 100 ms (ConfirmPoll).
func (tr *farmTrio) exchange(rounds int) {
	for range rounds {
		for i, f := range tr.farms {
			tr.board.beat[tr.live[i]] = tr.now
			f.Members(tr.live[i], tr.live, time.UnixMilli(tr.now))
			f.Confirm(tr.t.Context())
		}
		tr.now += 100
	}
}

// report gives each node's rows due of shop.test to its farm, and lets the nodes settle.
func (tr *farmTrio) report(rows ...int) {
	for i, f := range tr.farms {
		f.ReportDemand(map[string]int{"shop.test": rows[i]})
	}
	tr.exchange(12)
}

// TestDivisionKeepsASlotWhereItIs: three nodes, a host of limit 2. node-b and node-c hold its
// two slots by their demand (40 and 50 rows, node-a none); as they render, their rows drain to
// 22 and 32 while node-a comes to have 30. Each of the three would use a slot as well as the
// other, and a slot that moves idles while the renders of the node that gives it up end and
// the nodes confirm; so the slots stay with node-b and node-c, whose quotas (0.52 and 0.76 of
// a slot) still round up to them. A slot moves when its node's demand goes to none.
func TestDivisionKeepsASlotWhereItIs(t *testing.T) {
	tr := newFarmTrio(t)
	tr.report(0, 40, 50)
	if got := tr.shares(); got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("demand 0/40/50: shares %v, want [0 1 1]", got)
	}
	tr.report(30, 22, 32)
	if got := tr.shares(); got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("demand 30/22/32, the slots with node-b and node-c: shares %v, want them kept [0 1 1]", got)
	}
	tr.report(30, 0, 32)
	if got := tr.shares(); got[0] != 1 || got[1] != 0 || got[2] != 1 {
		t.Fatalf("node-b has no rows left: shares %v, want [1 0 1]", got)
	}
}

// TestFarmPollsWhileItsDivisionFollowsDemand: while the division follows the nodes' demand, a
// node that moves on to the next one (its demand changed) holds back every node's growth until
// the others confirm it too, and each finds that it moved on at its next confirmation: every
// node confirms every 100 ms (ConfirmPoll) then, not at its next tick. Once no node has
// demand (the equal division), it confirms at its ticks again.
func TestFarmPollsWhileItsDivisionFollowsDemand(t *testing.T) {
	tr := newFarmTrio(t)
	tr.report(0, 40, 50)
	for i, f := range tr.farms {
		if w := f.confirmWait(); w > ConfirmPoll {
			t.Fatalf("%s waits %v for its next confirmation under a division that follows demand, want %v",
				tr.live[i], w, ConfirmPoll)
		}
	}
	tr.report(0, 0, 0)
	tr.report(0, 0, 0)
	for i, f := range tr.farms {
		if w := f.confirmWait(); w <= ConfirmPoll {
			t.Fatalf("%s waits %v for its next confirmation with no demand anywhere, want its tick", tr.live[i], w)
		}
	}
}

// TestFarmConfirmsWithRendersThatFitItsShare: node-c holds both slots of shop.test (its rows
// alone are due) and renders two pages; node-b's rows come, and the nodes move to the next
// rounds. Where node-c keeps both slots, its two renders fit, and it confirms at once rather
// than when they end: the division settles with them in flight. Where its share goes to one,
// the render that holds its second slot does not fit: node-b holds nothing until that render
// ends, and then its slot, while node-c's other render is still in flight.
func TestFarmConfirmsWithRendersThatFitItsShare(t *testing.T) {
	tr := newFarmTrio(t)
	tr.report(0, 0, 50)
	if got := tr.shares(); got[2] != 2 {
		t.Fatalf("node-c's rows alone are due: shares %v, want [0 0 2]", got)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("desktop|https://shop.test/p%d", i)) }
	var toks []shm.Lease
	for i := range 2 {
		tok, ok := Admit(tr.segs[2], tr.cfg, key(i), tr.now, 60_000, uint64(i+1))
		if !ok {
			t.Fatalf("node-c could not take slot %d of 2", i+1)
		}
		toks = append(toks, tok)
	}
	hash := shm.HostHash([]byte("shop.test"))
	second := slices.IndexFunc(toks, func(l shm.Lease) bool { return l.KeyHash == token(hash, 1) })
	if second < 0 {
		t.Fatal("neither render holds shop.test's second slot")
	}
	// node-b's rows come: the next round still follows the demand published with the one
	// settled (node-c's alone), then node-b's too.
	for _, f := range tr.farms[:2] {
		f.ReportDemand(map[string]int{"shop.test": 0})
	}
	tr.farms[1].ReportDemand(map[string]int{"shop.test": 50})
	tr.exchange(3)
	if f := MembershipOf(tr.segs[2]); !f.Settled || f.SettledRound != f.Round {
		t.Fatalf("node-c's two renders fit its two slots of the next division, which did not settle: %+v", f)
	}
	tr.exchange(6)
	if got := tr.shares(); got[1] != 0 {
		t.Fatalf("node-b holds %d while node-c's render in its second slot is in flight: %v", got[1], got)
	}
	tr.segs[2].Leases().Release(toks[second], tr.now, 0)
	tr.exchange(6)
	if got := tr.shares(); got[1] != 1 || got[2] != 1 {
		t.Fatalf("node-c's render in its first slot fits its share of one: shares %v, want [0 1 1] with it in flight", got)
	}
}
