package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/shm"
)

// fakeRegistry is the database of a cluster in memory, with a clock the test moves. release
// observes the node's fence at the moment a handover is sent: the invariant is that the node
// stopped granting the shard before.
type fakeRegistry struct {
	mu       sync.Mutex
	now      time.Time
	nodes    map[string]*Node
	inc      map[string]string
	leases   []Lease
	failNext bool // the next Renew fails (the database is unreachable)
	release  func(shards []int32)
}

func newFakeRegistry(shards int, now time.Time) *fakeRegistry {
	r := &fakeRegistry{now: now, nodes: map[string]*Node{}, inc: map[string]string{}}
	for sh := range int32(shards) {
		r.leases = append(r.leases, Lease{Shard: sh})
	}
	return r
}

func (r *fakeRegistry) Register(_ context.Context, id, addr, inc string, ttl time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.nodes[id]; ok && r.inc[id] != inc && !n.Stopping && n.HeartbeatAt.After(r.now.Add(-ttl)) {
		return ErrIdentityInUse
	}
	r.nodes[id] = &Node{ID: id, Addr: addr, StartedAt: r.now, HeartbeatAt: r.now}
	r.inc[id] = inc
	return nil
}

func (r *fakeRegistry) Heartbeat(_ context.Context, id, inc string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.nodes[id]; ok && r.inc[id] == inc && !n.Stopping {
		n.HeartbeatAt = r.now
		return nil
	}
	return ErrIdentityInUse
}

func (r *fakeRegistry) SetStopping(_ context.Context, id, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.nodes[id]; ok {
		n.Stopping = true
	}
	return nil
}

func (r *fakeRegistry) Deregister(_ context.Context, id, _ string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodes, id)
	return nil
}

func (r *fakeRegistry) ReadView(context.Context) (View, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := View{Now: r.now, Leases: slices.Clone(r.leases)}
	for _, n := range r.nodes {
		v.Nodes = append(v.Nodes, *n)
	}
	return v, nil
}

func (r *fakeRegistry) Acquire(_ context.Context, id string, shard int32, seen int64, ttl time.Duration) (int64, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.leases[shard]
	if l.Epoch != seen || (l.Owner != "" && l.Owner != id && l.ExpiresAt.After(r.now)) {
		return 0, false, nil
	}
	l.Owner, l.Epoch, l.ExpiresAt = id, l.Epoch+1, r.now.Add(ttl)
	return l.Epoch, true, nil
}

func (r *fakeRegistry) Renew(_ context.Context, id string, shards []int32, epochs []int64, ttl time.Duration) (map[int32]bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failNext {
		r.failNext = false
		return nil, errors.New("connection refused")
	}
	out := map[int32]bool{}
	for i, sh := range shards {
		if l := &r.leases[sh]; l.Owner == id && l.Epoch == epochs[i] {
			l.ExpiresAt = r.now.Add(ttl)
			out[sh] = true
		}
	}
	return out, nil
}

func (r *fakeRegistry) Release(_ context.Context, id string, shards []int32, epochs []int64) error {
	if r.release != nil {
		r.release(shards)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, sh := range shards {
		if l := &r.leases[sh]; l.Owner == id && l.Epoch == epochs[i] {
			l.Owner, l.ExpiresAt = "", r.now
		}
	}
	return nil
}

func (r *fakeRegistry) advance(d time.Duration) {
	r.mu.Lock()
	r.now = r.now.Add(d)
	r.mu.Unlock()
}

func (r *fakeRegistry) owners() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := map[string]int{}
	for _, l := range r.leases {
		if l.Owner != "" && l.ExpiresAt.After(r.now) {
			c[l.Owner]++
		}
	}
	return c
}

type testNode struct {
	m     *Member
	seg   *shm.Segment
	owned [][]int32
}

const testShards = 32

func newTestNode(t *testing.T, reg *fakeRegistry, id string) *testNode {
	t.Helper()
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 1, EpochMs: reg.now.UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	w, _ := seg.Worker(0)
	n := &testNode{seg: seg}
	n.m = NewMember(Options{
		Registry: reg, ID: id, Addr: id, Incarnation: id + "/1", TTL: 10 * time.Second, Shards: testShards,
		Owned: func(_ context.Context, shards []int32, _ []int64) error {
			n.owned = append(n.owned, slices.Clone(shards))
			return nil
		},
		Fence: seg.Fence(), Leases: seg.Leases(), Worker: w,
		Now: func() time.Time { reg.mu.Lock(); defer reg.mu.Unlock(); return reg.now }, Log: zerolog.Nop(),
	})
	return n
}

// tick runs one round of the member's loop by hand.
func (n *testNode) tick() {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	n.m.tickLocked(context.Background())
}

func TestMemberHandsOverOnlyAfterItStoppedGranting(t *testing.T) {
	reg := newFakeRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	a := newTestNode(t, reg, "node-a")
	if err := a.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.m.Stop)
	if got := reg.owners()["node-a"]; got != testShards {
		t.Fatalf("node-a alone owns %d shards after Start, want %d", got, testShards)
	}
	if _, until := a.seg.Fence().Load(); until != reg.now.Add(7500*time.Millisecond).UnixMilli() {
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
	now := reg.now.UnixMilli()
	lease, st := a.seg.Leases().Acquire(key, now, 60_000, 1)
	if st != shm.Acquired {
		t.Fatal(st)
	}
	entryFence := a.seg.Fence().Version()
	var checked bool
	reg.release = func(shards []int32) {
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

	b := newTestNode(t, reg, "node-b")
	if err := b.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.m.Stop)
	a.tick() // a sees b live: hands b's shards over
	b.tick() // b takes them
	if !checked {
		t.Fatal("node-a released nothing when node-b joined")
	}
	owners := reg.owners()
	if owners["node-a"]+owners["node-b"] != testShards || owners["node-b"] == 0 {
		t.Fatalf("owners after node-b joined: %v", owners)
	}
	shards, _ := b.m.Held()
	if !slices.Contains(shards, moved) {
		t.Fatalf("node-b does not hold shard %d: %v", moved, shards)
	}

	// The database does not answer node-a's renewal: grantUntil stays where it was and runs out.
	_, untilBefore := a.seg.Fence().Load()
	reg.advance(2500 * time.Millisecond)
	reg.failNext = true
	a.tick()
	if _, until := a.seg.Fence().Load(); until != untilBefore {
		t.Fatalf("grantUntil moved from %d to %d on a failed renewal", untilBefore, until)
	}

	// Stop hands everything over at once, and node-b takes it at its next tick, no TTL later.
	a.m.Stop()
	b.tick()
	if got := reg.owners(); got["node-b"] != testShards {
		t.Fatalf("owners after node-a stopped: %v", got)
	}
}

func TestMemberGivesUpALeaseFoundLost(t *testing.T) {
	reg := newFakeRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	a := newTestNode(t, reg, "node-a")
	if err := a.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.m.Stop)
	v0 := a.seg.Fence().Version()
	// Another node took shard 3 while node-a was paused.
	reg.mu.Lock()
	reg.leases[3] = Lease{Shard: 3, Owner: "node-z", Epoch: reg.leases[3].Epoch + 1, ExpiresAt: reg.now.Add(time.Hour)}
	reg.mu.Unlock()
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
	reg := newFakeRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	a := newTestNode(t, reg, "node-a")
	if err := a.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.m.Stop)
	twin := newTestNode(t, reg, "node-a")
	twin.m.opts.Incarnation = "node-a/2"
	// Each retry moves the clock by what it waits, while node-a keeps heartbeating.
	waits := 0
	twin.m.opts.After = func(d time.Duration) <-chan time.Time {
		waits++
		reg.advance(d)
		a.tick()
		c := make(chan time.Time, 1)
		c <- reg.now
		return c
	}
	if err := twin.m.Start(context.Background()); !errors.Is(err, ErrIdentityInUse) {
		t.Fatalf("a second process under a live identity started: %v", err)
	}
	if waits < 4 {
		t.Fatalf("the second process gave up after %d waits, before the live one's heartbeat could have expired", waits)
	}
}

// A node restarted at once after a crash finds its previous run's heartbeat still fresh: it
// waits until that heartbeat is older than the TTL, then starts, without failing.
func TestRestartAfterACrashWaitsOutTheOldHeartbeat(t *testing.T) {
	reg := newFakeRegistry(testShards, time.UnixMilli(1_800_000_000_000))
	crashed := newTestNode(t, reg, "node-a")
	if err := crashed.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(crashed.m.Stop) // its loop ends with the test
	// kill -9: no Stop, no more heartbeats.
	again := newTestNode(t, reg, "node-a")
	again.m.opts.Incarnation = "node-a/2"
	again.m.opts.After = func(d time.Duration) <-chan time.Time {
		reg.advance(d)
		c := make(chan time.Time, 1)
		c <- reg.now
		return c
	}
	if err := again.m.Start(context.Background()); err != nil {
		t.Fatalf("the restarted node did not start once the old heartbeat expired: %v", err)
	}
	t.Cleanup(again.m.Stop)
	if got := reg.owners()["node-a"]; got != testShards {
		t.Fatalf("the restarted node-a owns %d shards, want %d", got, testShards)
	}
}
