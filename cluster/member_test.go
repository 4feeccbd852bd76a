package cluster_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	. "github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/cluster/clustertest"
	"github.com/freshq/freshq/shm"
)

type testNode struct {
	m     *Member
	seg   *shm.Segment
	owned [][]int32
	waits int // of Start, for an identity in use
}

const testShards = 32

// newTestNode is a member of reg whose rounds the test drives (tick), under incarnation inc;
// its waits at Start move reg's clock by what they wait, and call during, if set.
func newTestNode(t *testing.T, reg *clustertest.MemRegistry, id, inc string, during func()) *testNode {
	t.Helper()
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 1, EpochMs: reg.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	w, _ := seg.Worker(0)
	n := &testNode{seg: seg}
	n.m = NewMember(Options{
		Registry: reg, ID: id, Addr: id, Incarnation: inc, TTL: 10 * time.Second, Shards: testShards,
		Owned: func(_ context.Context, shards []int32, _ []int64) error {
			n.owned = append(n.owned, slices.Clone(shards))
			return nil
		},
		Fence: seg.Fence(), Leases: seg.Leases(), Worker: w,
		Now: reg.Now, Log: zerolog.Nop(),
		After: func(d time.Duration) <-chan time.Time {
			n.waits++
			reg.Advance(d)
			if during != nil {
				during()
			}
			c := make(chan time.Time, 1)
			c <- reg.Now()
			return c
		},
		Ticks: make(chan time.Time), // never: the test ticks
		// The monotonic clock is the registry's, which no test here steps back; the timer that
		// ends a grant window never fires (TestGrantWindowIsMeasuredOnTheMonotonicClock drives it).
		Mono:      func() time.Duration { return reg.Now().Sub(time.UnixMilli(0)) },
		AfterFunc: func(time.Duration, func()) func() bool { return func() bool { return true } },
	})
	return n
}

// monoClock is a monotonic clock the test moves, with the timers AfterFunc set on it.
type monoClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []monoTimer
}

type monoTimer struct {
	at      time.Duration
	f       func()
	stopped *bool
}

func (c *monoClock) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *monoClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	stopped := new(bool)
	c.timers = append(c.timers, monoTimer{at: c.now + d, f: f, stopped: stopped})
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !*stopped
		*stopped = true
		return was
	}
}

// Advance moves the clock on by d and runs the timers that came due, as their goroutines would.
func (c *monoClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	var due []func()
	for _, tm := range c.timers {
		if tm.at <= c.now && !*tm.stopped {
			*tm.stopped = true
			due = append(due, tm.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// The grant window is measured on the monotonic clock. A node renews its shard leases at t0,
// which lets it grant until t0 + ¾·TTL; then its wall clock is stepped back by an hour and it
// is partitioned (no tick renews anything). Its takers compare the fence with their wall
// clock: computed from a wall reading, grantUntil let the node grant for an hour and ¾·TTL
// more, while another node may take its shards a TTL after t0. Now the node stops granting
// once ¾·TTL have passed on the monotonic clock, whatever the wall clock says, and a renewal
// made after the step opens a window that the takers' stepped wall clock ends in time too.
func TestGrantWindowIsMeasuredOnTheMonotonicClock(t *testing.T) {
	reg := clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 1, EpochMs: reg.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	w, _ := seg.Worker(0)
	var mono monoClock
	var mu sync.Mutex
	var step time.Duration // the node's wall clock, from the database's
	wall := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return reg.Now().Add(step)
	}
	const ttl = 10 * time.Second
	m := NewMember(Options{
		Registry: reg, ID: "node-a", Addr: "node-a", Incarnation: "node-a/1", TTL: ttl, Shards: testShards,
		Owned: func(context.Context, []int32, []int64) error { return nil },
		Fence: seg.Fence(), Leases: seg.Leases(), Worker: w, Now: wall, Log: zerolog.Nop(),
		After: func(time.Duration) <-chan time.Time { return make(chan time.Time) },
		Ticks: make(chan time.Time), Mono: mono.Mono, AfterFunc: mono.AfterFunc,
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	fence := seg.Fence()
	version := fence.Version()
	grants := func() bool { return fence.Allows(version, wall().UnixMilli()) }
	if !grants() {
		t.Fatal("the node does not grant after its first renewal")
	}

	mu.Lock()
	step = -time.Hour // the wall clock is stepped back an hour; then the node is partitioned
	mu.Unlock()
	elapse := func(d time.Duration) {
		reg.Advance(d)
		mono.Advance(d)
	}
	elapse(ttl*3/4 - time.Millisecond)
	if !grants() {
		t.Fatal("the node stopped granting before ¾·TTL had passed")
	}
	elapse(time.Millisecond)
	if grants() {
		_, until := fence.Load()
		t.Fatalf("¾·TTL after its renewal, on the monotonic clock, the node still grants: grantUntil %d is %v after its wall clock",
			until, time.Duration(until-wall().UnixMilli())*time.Millisecond)
	}

	// A renewal after the step opens a window on the stepped clock, ended in time again.
	m.Tick(context.Background())
	if !grants() {
		t.Fatal("the node does not grant after a renewal on the stepped clock")
	}
	if _, until := fence.Load(); until != wall().Add(ttl*3/4).UnixMilli() {
		t.Fatalf("grantUntil %d, want ¾·TTL after the renewal on the node's wall clock (%d)", until, wall().Add(ttl*3/4).UnixMilli())
	}
	elapse(ttl * 3 / 4)
	if grants() {
		t.Fatal("the window opened after the step outlasted ¾·TTL")
	}
}

// tick runs one round of the member's loop by hand.
func (n *testNode) tick() { n.m.Tick(context.Background()) }

func TestMemberHandsOverOnlyAfterItStoppedGranting(t *testing.T) {
	reg := clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	a := newTestNode(t, reg, "node-a", "node-a/1", nil)
	if err := a.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.m.Stop)
	if got := reg.Owners()["node-a"]; got != testShards {
		t.Fatalf("node-a alone owns %d shards after Start, want %d", got, testShards)
	}
	if _, until := a.seg.Fence().Load(); until != reg.Now().Add(7500*time.Millisecond).UnixMilli() {
		t.Fatalf("grantUntil %d, want three quarters of the TTL after the tick began", until)
	}

	// A grant of a shard node-a will hand over, live in its lease table.
	var moved int32 = -1
	for sh := range int32(testShards) {
		if Desired(sh, []string{"node-a", "node-b"}) == "node-b" {
			moved = sh
			break
		}
	}
	var key uint64
	for h := uint64(1); ; h++ {
		if int32(h%testShards) == moved {
			key = h
			break
		}
	}
	now := reg.Now().UnixMilli()
	lease, st := a.seg.Leases().Acquire(key, now, 60_000, 1)
	if st != shm.Acquired {
		t.Fatal(st)
	}
	entryFence := a.seg.Fence().Version()
	var checked bool
	reg.OnRelease = func(shards []int32) {
		checked = true
		if a.seg.Fence().Allows(uint32(entryFence), now) {
			t.Errorf("the node still granted its published set when it released shards %v", shards)
		}
		if a.seg.Leases().Check(lease, key, now) == nil {
			t.Errorf("the node's grant in shard %d was still live when it released it", moved)
		}
		if last := a.owned[len(a.owned)-1]; slices.Contains(last, moved) {
			t.Errorf("the store still worked on shard %d when it was released", moved)
		}
	}

	b := newTestNode(t, reg, "node-b", "node-b/1", nil)
	if err := b.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.m.Stop)
	a.tick() // a sees b live: hands b's shards over
	b.tick() // b takes them
	if !checked {
		t.Fatal("node-a released nothing when node-b joined")
	}
	owners := reg.Owners()
	if owners["node-a"]+owners["node-b"] != testShards || owners["node-b"] == 0 {
		t.Fatalf("owners after node-b joined: %v", owners)
	}
	shards, _ := b.m.Held()
	if !slices.Contains(shards, moved) {
		t.Fatalf("node-b does not hold shard %d: %v", moved, shards)
	}

	// The database does not answer node-a's renewal: grantUntil stays where it was and runs out.
	_, untilBefore := a.seg.Fence().Load()
	reg.Advance(2500 * time.Millisecond)
	reg.FailNextRenew = true
	a.tick()
	if _, until := a.seg.Fence().Load(); until != untilBefore {
		t.Fatalf("grantUntil moved from %d to %d on a failed renewal", untilBefore, until)
	}

	// Stop hands everything over at once, and node-b takes it at its next tick, no TTL later.
	a.m.Stop()
	b.tick()
	if got := reg.Owners(); got["node-b"] != testShards {
		t.Fatalf("owners after node-a stopped: %v", got)
	}
}

func TestMemberGivesUpALeaseFoundLost(t *testing.T) {
	reg := clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	a := newTestNode(t, reg, "node-a", "node-a/1", nil)
	if err := a.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.m.Stop)
	v0 := a.seg.Fence().Version()
	// Another node took shard 3 while node-a was paused.
	v, _ := reg.ReadView(context.Background())
	reg.SetLease(Lease{Shard: 3, Owner: "node-z", Epoch: v.Leases[3].Epoch + 1, ExpiresAt: reg.Now().Add(time.Hour)})
	a.tick()
	if shards, _ := a.m.Held(); slices.Contains(shards, 3) || len(shards) != testShards-1 {
		t.Fatalf("node-a holds %v after losing shard 3", shards)
	}
	if a.seg.Fence().Version() == v0 {
		t.Fatal("the fence did not move when a shard was lost")
	}
	w, _ := a.seg.Worker(0)
	if w.Load(shm.CounterShardsLost) != 1 || w.Load(shm.CounterShardsOwned) != testShards-1 {
		t.Fatalf("counters: lost %d owned %d", w.Load(shm.CounterShardsLost), w.Load(shm.CounterShardsOwned))
	}
}

func TestSecondProcessUnderALiveIdentityIsRefused(t *testing.T) {
	reg := clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	a := newTestNode(t, reg, "node-a", "node-a/1", nil)
	if err := a.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.m.Stop)
	// Each retry moves the clock by what it waits, while node-a keeps heartbeating.
	twin := newTestNode(t, reg, "node-a", "node-a/2", a.tick)
	if err := twin.m.Start(context.Background()); !errors.Is(err, ErrIdentityInUse) {
		t.Fatalf("a second process under a live identity started: %v", err)
	}
	if twin.waits < 4 {
		t.Fatalf("the second process gave up after %d waits, before the live one's heartbeat could have expired", twin.waits)
	}
}

// A node restarted at once after a crash finds its previous run's heartbeat still fresh: it
// waits until that heartbeat is older than the TTL, then starts, without failing.
func TestRestartAfterACrashWaitsOutTheOldHeartbeat(t *testing.T) {
	reg := clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	crashed := newTestNode(t, reg, "node-a", "node-a/1", nil)
	if err := crashed.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(crashed.m.Stop) // its loop ends with the test
	// kill -9: no Stop, no more heartbeats.
	again := newTestNode(t, reg, "node-a", "node-a/2", nil)
	if err := again.m.Start(context.Background()); err != nil {
		t.Fatalf("the restarted node did not start once the old heartbeat expired: %v", err)
	}
	t.Cleanup(again.m.Stop)
	if got := reg.Owners()["node-a"]; got != testShards {
		t.Fatalf("the restarted node-a owns %d shards, want %d", got, testShards)
	}
}

// TestMemberTicksAgainSoonWhileTheMembershipMoves: a node that joins a live node finds every
// shard it should hold still held by the other, which hands them over at its own tick. The
// joiner ticks again Retick later (and so again after that while shards it wants are held
// elsewhere), not a quarter of a TTL later: it holds its shards within Retick of the
// handover, and so does a node a membership change reaches, the tick after the change.
func TestMemberTicksAgainSoonWhileTheMembershipMoves(t *testing.T) {
	reg := clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	const retick = 500 * time.Millisecond
	type node struct {
		m    *Member
		mono *monoClock
	}
	mk := func(id string) node {
		seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 1, EpochMs: reg.Now().UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { seg.Close() })
		w, _ := seg.Worker(0)
		mono := &monoClock{}
		m := NewMember(Options{
			Registry: reg, ID: id, Addr: id, Incarnation: id + "/1", TTL: 10 * time.Second, Shards: testShards,
			Owned: func(context.Context, []int32, []int64) error { return nil },
			Fence: seg.Fence(), Leases: seg.Leases(), Worker: w, Now: reg.Now, Log: zerolog.Nop(),
			After: func(time.Duration) <-chan time.Time { return make(chan time.Time) },
			Ticks: make(chan time.Time), Mono: mono.Mono, AfterFunc: mono.AfterFunc, Retick: retick,
		})
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return node{m: m, mono: mono}
	}
	held := func(n node) int { shards, _ := n.m.Held(); return len(shards) }
	a := mk("node-a")
	b := mk("node-b") // wants about half of the shards, all held by node-a
	if got := held(b); got != 0 {
		t.Fatalf("node-b holds %d shards that node-a has not handed over", got)
	}
	a.m.Tick(context.Background()) // node-a's own tick: it sees node-b and hands its shards over
	b.mono.Advance(retick)
	deadline := time.Now().Add(10 * time.Second)
	for held(b) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("node-b holds no shard %v after node-a handed them over (owners %v): it waits for its next tick, a quarter of a TTL", retick, reg.Owners())
		}
		time.Sleep(time.Millisecond) // the member's loop ticks on its own goroutine
	}
	if owners := reg.Owners(); owners["node-a"]+owners["node-b"] != testShards {
		t.Fatalf("owners %v", owners)
	}
}
