package fuzz

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// The division of the hosts' limits across a cluster (hosts.Farm, docs/CLUSTER.md) over
// arbitrary histories of four node identities on one simulated database: nodes start, are
// killed (their renders end with them, their rows stay), restart with a fresh segment, and are
// paused (worker 0 makes no tick while its render workers go on granting until the node's
// grant window, 3/4 of a TTL after its last tick, closes, and its renders go on to their end);
// each node's clock is off the database's by up to 400 ms and its measure of that offset, at
// each tick, by up to fmClockErr (the bound the division assumes is a second), and it ticks at
// its own phase, worker 0's membership tick and its farm's
// confirmation apart. Each node reports a demand per host (its rows due, as its sweep would)
// that changes at random, often to none, so the divisions that follow demand settle, move and
// fall back to the equal one. Every 50 ms each node's render workers take every render their host
// slots allow, whatever their demand (hosts.Admit on the node's real segment, whose lease table the Farm's
// confirmation reads), each lasting a random time up to render.timeout. After every step, the
// renders of a host in flight over all nodes never exceed the host's limit.
//
// runFarmModel reports the first excess it finds (as a test failure); a history of the live
// division through the board (farmBoard) is all the nodes share.

const (
	fmStep    = int64(50)
	fmTick    = 500 * time.Millisecond
	fmTTL     = int64(2000)
	fmTimeout = 3 * time.Second
	fmBase    = int64(1_800_000_000_000)
	fmSlots   = 8 // render slots a node
	// fmClockErr bounds the error of a node's measure of its clock's offset from the
	// database's, at each tick.
	fmClockErr = int64(200)
)

var fmLimits = map[string]int{"one.test": 1, "two.test": 2, "three.test": 3}

// farmBoard is the database of the model: each node's heartbeat and confirmation, on the
// database's clock (the model's now). demandBased counts the confirmations of a division that
// follows demand (basis not 0).
type farmBoard struct {
	now         *int64
	heartbeat   map[string]int64
	rows        map[string]store.FarmConfirm
	demandBased int
}

func (b *farmBoard) PublishConfirm(_ context.Context, c store.FarmConfirm) error {
	c.AtMs = *b.now
	if c.Basis != 0 {
		b.demandBased++
	}
	b.rows[c.Node] = c
	return nil
}

func (b *farmBoard) ReadConfirms(context.Context) ([]store.FarmConfirm, int64, error) {
	ids := make([]string, 0, len(b.rows))
	for id := range b.rows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]store.FarmConfirm, 0, len(ids))
	for _, id := range ids {
		r := b.rows[id]
		r.AtMs = max(r.AtMs, b.heartbeat[id])
		out = append(out, r)
	}
	return out, *b.now, nil
}

func (b *farmBoard) live() []string {
	var ids []string
	for id, h := range b.heartbeat {
		if h > *b.now-fmTTL {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

type fmRender struct {
	host  string
	token shm.Lease
	end   int64 // the database's ms
}

type fmNode struct {
	id                  string
	gen                 int
	alive, paused       bool
	skew                int64 // this node's clock minus the database's
	memberPhase, fPhase int64
	seg                 *shm.Segment
	farm                *hosts.Farm
	grantUntil          int64 // local ms
	renders             []fmRender
	started             map[string]int
}

// runFarmModel runs the history ops on the model's database, or through board when it is not
// nil (a lyingBoard: the division with a defect, which the model must catch).
func runFarmModel(t testing.TB, ops []byte, board hosts.ConfirmBoard) *farmBoard {
	return runFarmModelClock(t, ops, board, fmClockErr)
}

// runFarmModelClock is runFarmModel with each measure of a node's clock offset off by up to
// clockErr ms (0: exact).
func runFarmModelClock(t testing.TB, ops []byte, board hosts.ConfirmBoard, clockErr int64) *farmBoard {
	if len(ops) > 160 {
		ops = ops[:160]
	}
	seed := fnv.New64a()
	seed.Write(ops)
	rng := rand.New(rand.NewPCG(seed.Sum64(), 59))
	clockRng := rand.New(rand.NewPCG(seed.Sum64(), 61)) // the clock's measures: rng's draws stay those of the history
	trace := os.Getenv("FRESHQ_FARM_TRACE") != ""       // the model's steps in the test log
	var now int64
	db := &farmBoard{now: &now, heartbeat: map[string]int64{}, rows: map[string]store.FarmConfirm{}}
	if board == nil {
		board = db
	} else if lb, ok := board.(*lyingBoard); ok {
		lb.db = db
	}
	grace := hosts.FarmGrace(fmTimeout, fmTick)
	cfg := &hosts.Limits{MaxConcurrency: 1, Overrides: fmLimits}
	dir := t.TempDir()
	nodes := make([]*fmNode, 4)
	for i := range nodes {
		nodes[i] = &fmNode{id: fmt.Sprintf("node-%c", 'a'+i)}
	}
	start := func(n *fmNode) {
		n.gen++
		n.skew = rng.Int64N(801) - 400
		n.memberPhase, n.fPhase = fmStep*rng.Int64N(10), fmStep*rng.Int64N(10)
		seg, err := shm.Create(filepath.Join(dir, fmt.Sprintf("%s-%d", n.id, n.gen)),
			shm.Options{Workers: 1, ReadyCapacity: 8, LeaseCapacity: 256, EpochMs: fmBase + now - 10_000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seg.Close() })
		skew := n.skew
		n.seg = seg
		n.farm = hosts.NewFarm(hosts.FarmOptions{Seg: seg, Confirms: board, Grace: grace, Round: hosts.FarmConfirmedRound(fmTick),
			Tick: fmTick, LeaseTTL: time.Duration(fmTTL) * time.Millisecond, Max: cfg.Max, Log: zerolog.Nop(),
			Now: func() time.Time { return time.UnixMilli(fmBase + now + skew) }})
		n.alive, n.paused, n.grantUntil, n.renders, n.started = true, false, 0, nil, map[string]int{}
		db.heartbeat[n.id] = now // it registers
	}
	hostNames := slices.Sorted(func(yield func(string) bool) {
		for h := range fmLimits {
			if !yield(h) {
				return
			}
		}
	})
	tickMs := fmTick.Milliseconds()
	step := func() {
		for _, n := range nodes {
			if !n.alive {
				continue
			}
			local := fmBase + now + n.skew
			keep := n.renders[:0]
			for _, r := range n.renders {
				if r.end <= now {
					n.seg.Leases().Release(r.token, local, 0)
					continue
				}
				keep = append(keep, r)
			}
			n.renders = keep
			if !n.paused && (now-n.memberPhase)%tickMs == 0 {
				db.heartbeat[n.id] = now
				// The database's clock as the node reads it, off by up to clockErr each time (a
				// round trip's measure): with fmClockErr the nodes' corrected clocks disagree by
				// 400 ms at most, within the second the division assumes, and a node's may step
				// back across a round's start.
				n.farm.Members(n.id, db.live(), time.UnixMilli(fmBase+now+clockRng.Int64N(2*clockErr+1)-clockErr))
				n.grantUntil = local + 3*fmTTL/4
				if rng.IntN(3) == 0 { // the sweep counted other rows due
					demand := map[string]int{}
					for _, h := range hostNames {
						if rng.IntN(2) == 0 {
							demand[h] = rng.IntN(50)
						}
					}
					n.farm.ReportDemand(demand)
				}
				if trace {
					t.Logf("%d %s members %v farm %+v", now, n.id, db.live(), hosts.MembershipOf(n.seg))
				}
			}
			// The farm confirms at its tick, and as often as every step while a division is
			// unsettled (hosts.ConfirmPoll): a third of the steps, at random.
			if !n.paused && ((now-n.fPhase)%tickMs == 0 || rng.IntN(3) == 0) {
				n.farm.Confirm(context.Background())
				if trace {
					t.Logf("%d %s confirm rows %v farm %+v", now, n.id, db.rows, hosts.MembershipOf(n.seg))
				}
			}
			if local >= n.grantUntil {
				continue
			}
			for _, h := range hostNames {
				for len(n.renders) < fmSlots {
					key := []byte(fmt.Sprintf("desktop|https://%s/p%d", h, rng.IntN(1000)))
					tok, ok := hosts.Admit(n.seg, cfg, key, local, fmTimeout.Milliseconds(), 1)
					if !ok {
						break
					}
					n.renders = append(n.renders, fmRender{host: h, token: tok, end: now + 1 + rng.Int64N(fmTimeout.Milliseconds())})
					n.started[h]++
					if trace && h == "three.test" {
						t.Logf("%d %s starts %s until %d", now, n.id, h, n.renders[len(n.renders)-1].end)
					}
				}
			}
		}
	}
	check := func(what string) {
		for _, h := range hostNames {
			total, by := 0, map[string]int{}
			for _, n := range nodes {
				if !n.alive {
					continue
				}
				for _, r := range n.renders {
					if r.host == h {
						total++
						by[n.id]++
					}
				}
			}
			if total > fmLimits[h] {
				t.Fatalf("at %d ms (%s): %d renders of %s in flight over the cluster, its limit is %d: %v",
					now, what, total, h, fmLimits[h], by)
			}
		}
	}
	advance := func(ms int64, what string) {
		for end := now + ms; now < end; now += fmStep {
			step()
			check(what)
		}
	}
	for _, n := range nodes[:3] {
		start(n)
	}
	for i, op := range ops {
		n := nodes[int(op>>4)%len(nodes)]
		var what string
		switch op % 8 {
		case 0, 1, 2: // time passes, up to 1.6 s
			advance(fmStep*int64(1+op>>3), "time")
			continue
		case 3: // a node starts, or restarts with a fresh segment after it was killed
			if !n.alive {
				start(n)
			}
			what = "start " + n.id
		case 4: // kill -9: its renders end with it; its rows stay
			if n.alive {
				n.alive, n.renders = false, nil
			}
			what = "kill " + n.id
		case 5: // SIGSTOP of worker 0: no tick; its render workers grant until the window closes
			if n.alive {
				n.paused = true
			}
			what = "pause " + n.id
		case 6: // SIGCONT
			n.paused = false
			what = "resume " + n.id
		case 7: // a long stretch: a node paused through it is declared dead meanwhile
			advance(2*fmTTL+grace.Milliseconds()/2, "long")
			continue
		}
		if trace {
			t.Logf("%d op %s", now, what)
		}
		check(fmt.Sprintf("op %d (%s)", i, what))
	}
	advance(3*grace.Milliseconds(), "the end")
	return db
}

// lyingBoard is the division without its confirmation: every node that ever published reads as
// having confirmed whatever division the reader last published, at once. It is how the model
// shows that the confirmation is what keeps the limit.
type lyingBoard struct {
	db   *farmBoard
	last store.FarmConfirm
}

func (b *lyingBoard) PublishConfirm(ctx context.Context, c store.FarmConfirm) error {
	b.last = c
	return b.db.PublishConfirm(ctx, c)
}

func (b *lyingBoard) ReadConfirms(ctx context.Context) ([]store.FarmConfirm, int64, error) {
	rows, now, err := b.db.ReadConfirms(ctx)
	for i := range rows {
		rows[i].Members, rows[i].Round, rows[i].Basis = b.last.Members, b.last.Round, b.last.Basis
	}
	return rows, now, err
}

// A byte 0xf8 lets 1.6 s pass; the high nibble names the node (a to d) an event is about.
var farmModelSeeds = [][]byte{
	{0xf8, 0xf8, 0xf8, 0xf8, 0x33, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8},             // node-d joins three
	{0xf8, 0xf8, 0xf8, 0x04, 0xf8, 0xf8, 0x07, 0x03, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8},       // node-a killed, back after its lease
	{0xf8, 0xf8, 0xf8, 0x14, 0x13, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8},                               // node-b killed, back within its lease
	{0xf8, 0xf8, 0x15, 0xf8, 0x07, 0x16, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8, 0xf8},                   // node-b paused past its lease, then resumed
	{0xf8, 0x25, 0xf8, 0x26, 0xf8, 0x25, 0x33, 0xf8, 0x26, 0xf8, 0xf8},                         // node-c paused within its lease, node-d joins
	{0xf8, 0x33, 0x24, 0xf8, 0x14, 0x23, 0xf8, 0x13, 0x07, 0x34, 0xf8, 0x33, 0xf8, 0xf8, 0xf8}, // churn
	{0xf8, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07},             // rotations
}

func FuzzFarmDivision(f *testing.F) {
	for _, s := range farmModelSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ops []byte) { runFarmModel(t, ops, nil) })
}

// TestFarmDivisionHistories runs the seeds and random histories, and checks that divisions
// that follow demand were confirmed in them (the model exercises them).
func TestFarmDivisionHistories(t *testing.T) {
	histories := slices.Clone(farmModelSeeds)
	rng := rand.New(rand.NewPCG(7, 59))
	for range 100 {
		ops := make([]byte, 40+rng.IntN(80))
		for i := range ops {
			ops[i] = byte(rng.IntN(256))
		}
		histories = append(histories, ops)
	}
	demandBased := 0
	for i, ops := range histories {
		t.Run(fmt.Sprint(i), func(t *testing.T) { demandBased += runFarmModel(t, ops, nil).demandBased })
	}
	t.Logf("%d confirmations of a division that follows demand", demandBased)
	if demandBased == 0 {
		t.Fatal("no division that follows demand was confirmed: the model does not exercise them")
	}
}

// TestFarmDivisionCatchesAShareGrownUnconfirmed: the same histories with the confirmation
// skipped (every node reads as having confirmed the division its reader uses, a share grows at
// once) exceed a limit; the model is what shows the confirmation is needed.
func TestFarmDivisionCatchesAShareGrownUnconfirmed(t *testing.T) {
	caught := 0
	for i, ops := range farmModelSeeds {
		ft := &failRecorder{TB: t}
		func() {
			defer func() {
				if r := recover(); r != nil && r != errFailRecorded {
					panic(r)
				}
			}()
			runFarmModel(ft, ops, &lyingBoard{})
		}()
		if ft.msg != "" {
			caught++
			t.Logf("seed %d without the confirmation: %s", i, ft.msg)
		}
	}
	if caught == 0 {
		t.Fatal("no history exceeded a limit with the confirmation skipped: the model does not exercise it")
	}
}

var errFailRecorded = fmt.Errorf("failure recorded")

// failRecorder keeps a history's first failure instead of failing the test.
type failRecorder struct {
	testing.TB
	msg string
}

func (f *failRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(errFailRecorded)
}

// reformHistory is a history in which a node leaves the membership while its renders are in
// flight and the same nodes form it again within the round: between spans of time, a node's
// worker 0 is paused (SIGSTOP, or cut off from the database) just past its lease and then
// resumes, so the others count it gone for a tick or so and then live again, and the
// membership they read goes back to the same live nodes (the same MembersID). Every node's
// confirmations from before the change are still in its row. rng draws the spans and nodes.
func reformHistory(rng *rand.Rand) []byte {
	var ops []byte
	for len(ops) < 100 {
		for range 1 + rng.IntN(4) {
			ops = append(ops, byte(rng.IntN(32))<<3) // 50 ms to 1.6 s
		}
		n := byte(rng.IntN(3)) << 4
		// Paused for 1.65 s to 2.2 s: past the lease TTL (2 s) from its last heartbeat, which
		// was up to a tick (500 ms) before the pause; back at its next tick.
		ops = append(ops, n|5, 0xf8, byte(rng.IntN(12))<<3, n|6)
	}
	return ops
}

// reformSeed is a reformHistory, run with exact measures of the clocks' offsets, on which the
// division let three renders of two.test (limit 2) run at once while a node's confirmation
// outlived its membership: node-c had confirmed round r+2 (ahead of the clock) before a pause;
// back, its ticks had stopped long enough that it started its membership again, went back to
// the clock's round r and confirmed it, its row keeping r+2 as its confirmation before; node-a,
// whose membership had changed and formed again meanwhile (node-b paused past its lease),
// counted that as node-c holding to r+2 and took a slot of two.test that node-c's render,
// granted under r, held.
var reformSeed = []byte{
	0xa0, 0x20, 0xf0, 0x05, 0xf8, 0x20, 0x06, 0x40, 0x25, 0xf8, 0x48, 0x26, 0x00, 0x15, 0xf8, 0x30,
	0x16, 0x98, 0x70, 0x05, 0xf8, 0x30, 0x06, 0x98, 0xa0, 0x58, 0x15, 0xf8, 0x50, 0x16, 0x58, 0x58,
	0x25, 0xf8, 0x30, 0x26, 0x38, 0x10, 0x60, 0x68, 0x05, 0xf8, 0x08, 0x06, 0x70, 0x05, 0xf8, 0x48,
	0x06, 0x20, 0x70, 0x40, 0xc8, 0x15, 0xf8, 0x58, 0x16, 0xd0, 0x88, 0x00, 0x05, 0xf8, 0x10, 0x06,
	0xc8, 0x78, 0x25, 0xf8, 0x28, 0x26, 0x48, 0xd0, 0x05, 0xf8, 0x28, 0x06, 0xd0, 0x25, 0xf8, 0x58,
	0x26, 0x90, 0x88, 0x30, 0x98, 0x25, 0xf8, 0x58, 0x26, 0x38, 0x05, 0xf8, 0x50, 0x06, 0x58, 0xf0,
	0x15, 0xf8, 0x50, 0x16,
}

// TestFarmDivisionMembershipFormsAgain runs histories in which the same membership forms again
// within a round after a node left it with renders in flight (reformHistory, and reformSeed):
// a confirmation counts only for the membership it was made in, so none made before the node
// left lets a share grow after the membership formed again while that node's renders of an
// older division are in flight. The random ones measure the clocks' offsets with errors
// (fmClockErr), so a node's clock round also steps back now and then within a membership; it
// keeps the round it uses there, whose confirmation its row may hold.
func TestFarmDivisionMembershipFormsAgain(t *testing.T) {
	// The seed as it was found: every measure of a clock's offset exact.
	t.Run("seed", func(t *testing.T) { runFarmModelClock(t, reformSeed, nil, 0) })
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		ops := reformHistory(rng)
		t.Run(fmt.Sprint(i), func(t *testing.T) { runFarmModel(t, ops, nil) })
	}
}
