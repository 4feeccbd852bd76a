package hosts

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/shm"
)

// TestShareDividesEveryLimit: under one membership and one round the nodes' shares of a host
// add up to its limit exactly, and over n consecutive rounds every node of n holds a share of
// every host at least once (a limit below the number of nodes starves no node's rows).
func TestShareDividesEveryLimit(t *testing.T) {
	for n := uint16(1); n <= 6; n++ {
		for limit := 1; limit <= 9; limit++ {
			for h := uint64(0); h < 40; h++ {
				hash := h * 0x9e3779b97f4a7c15
				held := make([]bool, n)
				for r := int64(100); r < 100+int64(n); r++ {
					sum := 0
					for i := range n {
						s := share(limit, hash, i, n, r)
						sum += s
						held[i] = held[i] || s > 0
					}
					if sum != limit {
						t.Fatalf("n %d, limit %d, host %x, round %d: shares add up to %d", n, limit, hash, r, sum)
					}
				}
				for i, ok := range held {
					if !ok {
						t.Fatalf("n %d, limit %d, host %x: node %d held no share in %d rounds", n, limit, hash, i, n)
					}
				}
			}
		}
	}
}

// simNode is one node of the farm simulation: its own segment and Farm, its clock skewed from
// the database's, and the renders it has in flight per host (their end times).
type simNode struct {
	id       string
	skew     int64 // ms added to the database's clock to read this node's
	phase    int64 // ms of the tick period at which it ticks
	from, to int64 // alive in [from, to) of the simulation's ms
	seg      *shm.Segment
	farm     *Farm
	inFlight map[string][]int64
	started  map[string]int
}

// TestFarmNeverOvercommitsAHost drives four nodes through a farm's life on a simulated clock
// (each node's skewed by up to 400 ms from the database's): three start together, one is killed
// (its renders die with it; the others see it gone a lease TTL later), one joins, the killed one
// comes back with a fresh segment. Every 50 ms each live node starts renders of five hosts
// (limits 1 to 5) while its allowance (Allow, through the Farm's farm words) lets it, each
// render lasting the longest a render may (3 s). The renders of a host in flight over the farm
// never exceed its limit, and every node alive for a whole round renders every host.
func TestFarmNeverOvercommitsAHost(t *testing.T) {
	const (
		base      = int64(1_800_000_000_000)
		step      = int64(50)
		tick      = 500 * time.Millisecond
		ttl       = int64(2000)
		renderDur = 3 * time.Second
		end       = int64(150_000)
	)
	grace := FarmGrace(renderDur, tick)
	round := FarmRound(grace)
	cfg := Limits{MaxConcurrency: 4, Overrides: map[string]int{}}
	var hostNames []string
	for l := 1; l <= 5; l++ {
		h := fmt.Sprintf("l%d.test", l)
		cfg.Overrides[h] = l
		hostNames = append(hostNames, h)
	}
	var now int64 // the database's clock, from base
	nodes := []*simNode{
		{id: "node-a", skew: 0, phase: 0, from: 0, to: end},
		{id: "node-b", skew: 400, phase: 100, from: 0, to: 30_000},
		{id: "node-c", skew: -400, phase: 250, from: 0, to: end},
		{id: "node-d", skew: 170, phase: 350, from: 50_000, to: end},
		{id: "node-b", skew: -250, phase: 150, from: 80_000, to: end}, // b again, a new segment
	}
	for _, n := range nodes {
		n.seg = memSegment(t)
		n := n
		n.farm = NewFarm(FarmOptions{Seg: n.seg, Grace: grace, Round: round, Tick: tick, Log: zerolog.Nop(),
			Now: func() time.Time { return time.UnixMilli(base + now + n.skew) }})
		n.inFlight, n.started = map[string][]int64{}, map[string]int{}
	}
	live := func(t int64) []string { // the database's view at t: heartbeats younger than the TTL
		var ids []string
		for _, n := range nodes {
			if n.from <= t && t < n.to+ttl {
				ids = append(ids, n.id)
			}
		}
		return ids
	}
	for now = 0; now < end; now += step {
		for _, n := range nodes {
			if now == n.to { // killed: its renders end with it
				n.inFlight = map[string][]int64{}
			}
			if now < n.from || now >= n.to {
				continue
			}
			if (now-n.phase)%tick.Milliseconds() == 0 {
				n.farm.Members(n.id, live(now), time.UnixMilli(base+now))
			}
			local := base + now + n.skew
			for _, h := range hostNames {
				ends := n.inFlight[h][:0]
				for _, e := range n.inFlight[h] {
					if e > now {
						ends = append(ends, e)
					}
				}
				a := Of(n.seg, &cfg, []byte(h), local)
				for !a.Paused && len(ends) < a.Limit {
					ends = append(ends, now+renderDur.Milliseconds())
					n.started[h]++
				}
				n.inFlight[h] = ends
			}
		}
		for _, h := range hostNames {
			total := 0
			for _, n := range nodes {
				total += len(n.inFlight[h])
			}
			if total > cfg.Overrides[h] {
				t.Fatalf("at %d ms, %d renders of %s (limit %d) in flight over the farm", now, total, h, cfg.Overrides[h])
			}
		}
	}
	for _, n := range nodes {
		if n.to-n.from < 2*round.Milliseconds() {
			continue
		}
		for _, h := range hostNames {
			if n.started[h] == 0 {
				t.Errorf("%s (alive %d–%d ms) never rendered %s", n.id, n.from, n.to, h)
			}
		}
	}
}

// TestFarmSharesPauses: a refusal one node's Tracker sees is on the board at once (the Farm is
// nudged, no tick waited for), on the database's clock; another node's exchange adopts it on
// its own clock, keeps a later pause it had, and publishes nothing it only adopted.
func TestFarmSharesPauses(t *testing.T) {
	board := &memBoard{}
	a, _ := newTracker(t, "")
	b, bLog := newTracker(t, "")
	now := int64(t0)
	farmOf := func(tr *Tracker, skew int64) *Farm {
		f := NewFarm(FarmOptions{Seg: tr.Seg, Tracker: tr, Board: board, Grace: time.Second, Round: 4 * time.Second,
			Tick: time.Hour, Log: zerolog.Nop(), Now: func() time.Time { return time.UnixMilli(now + skew) }})
		f.Members("me", []string{"me", "other"}, time.UnixMilli(now)) // the database's clock: skew behind
		tr.OnPause = f.Paused
		return f
	}
	fa, fb := farmOf(a, 300), farmOf(b, -200)

	a.Observe([]byte("desktop|https://shop.test/p"), outcome.ServerError, 429, map[string]string{"retry-after": "3"}, now+300)
	select {
	case <-fa.nudge:
	default:
		t.Fatal("a refusal did not nudge the farm")
	}
	fa.publish(t.Context())
	if len(board.hosts) != 1 || board.hosts[0] != "shop.test" || board.until[0] != now+3000 || board.status[0] != 429 {
		t.Fatalf("the board holds %v %v %v; want shop.test until %d (the database's clock), 429", board.hosts, board.until, board.status, now+3000)
	}
	fb.Exchange(t.Context())
	st, ok := b.Seg.Hosts().Load(shm.HostHash([]byte("shop.test")))
	if !ok || st.PausedUntilMs != now-200+3000 || st.Cause != shm.HostCauseRetryAfter || st.Status != 429 {
		t.Fatalf("node b's table: %+v %v; want paused until %d on its clock", st, ok, now-200+3000)
	}
	wantLog(t, bLog, "host paused", map[string]any{"host": "shop.test", "source": "farm", "status": 429.0})
	if a := Of(b.Seg, &Limits{MaxConcurrency: 4}, []byte("shop.test"), now-200+2999); !a.Paused || a.HeldByFarm {
		t.Fatalf("node b's allowance before the pause ends: %+v", a)
	}
	select {
	case <-fb.nudge:
		t.Fatal("an adopted pause was published again")
	default:
	}
	b.Adopt("shop.test", now-200+1000, 503, now-200) // an earlier end: the later pause stays
	if st, _ := b.Seg.Hosts().Load(shm.HostHash([]byte("shop.test"))); st.PausedUntilMs != now-200+3000 {
		t.Fatalf("an earlier pause shortened the host's: %+v", st)
	}
}

// memBoard is a PauseBoard in memory, keeping the latest pause of each host.
type memBoard struct {
	hosts  []string
	until  []int64
	status []int32
}

func (m *memBoard) PublishPauses(_ context.Context, hosts []string, until []int64, status []int32) error {
	for i, h := range hosts {
		j := slices.Index(m.hosts, h)
		if j < 0 {
			m.hosts, m.until, m.status = append(m.hosts, h), append(m.until, until[i]), append(m.status, status[i])
		} else if until[i] > m.until[j] {
			m.until[j], m.status[j] = until[i], status[i]
		}
	}
	return nil
}

func (m *memBoard) ReadPauses(context.Context) ([]string, []int64, []int32, int64, error) {
	return m.hosts, m.until, m.status, 0, nil
}

// TestMembershipWords: a membership is packed into the segment's farm words as
// docs/shm-format.md draws them (index | nodes << 16 | prevIndex << 32 | prevNodes << 48, then
// since, grace, round and the clock offset), and read back whole.
func TestMembershipWords(t *testing.T) {
	seg := memSegment(t)
	if m := MembershipOf(seg); m != (Membership{}) {
		t.Fatalf("a new segment's membership: %+v, want no farm", m)
	}
	m := Membership{Index: 1, Nodes: 3, PrevIndex: 2, PrevNodes: FarmNone, SinceMs: 20_000, GraceMs: 4500, RoundMs: 18_000, ClockOffsetMs: -7,
		Adopted: true, Round: 42, Settled: true, SettledRound: 41}
	setMembership(seg, m)
	want := [shm.FarmWords]uint64{1 | 3<<16 | 2<<32 | FarmNone<<48, 20_000, 4500 | 18_000<<32, 42 | 43<<32, 0xffff_ffff_ffff_fff9}
	if w := seg.Hosts().LoadFarm(); w != want {
		t.Fatalf("farm words %#x, want %#x", w, want)
	}
	if got := MembershipOf(seg); got != m {
		t.Fatalf("read back %+v, want %+v", got, m)
	}
	// The last settled round of the membership before, and no round adopted.
	m = Membership{Index: 0, Nodes: 2, PrevIndex: 1, PrevNodes: 3, SinceMs: 1, GraceMs: 2, RoundMs: 3, PrevSettled: true, SettledRound: 7}
	setMembership(seg, m)
	if got := MembershipOf(seg); got != m {
		t.Fatalf("read back %+v, want %+v", got, m)
	}
}
