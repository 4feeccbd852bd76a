package fuzz

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/cluster/clustertest"
	"github.com/freshq/freshq/shm"
)

// The cluster's membership protocol over arbitrary histories of three nodes on one in-memory
// registry with a shared clock: rounds in any order, time passing in steps up to half a TTL,
// nodes paused (no rounds while time passes), stopped gracefully, or killed (never heard from
// again), and restarted. After every step, no shard may be grantable by two nodes at once: a
// node may grant a shard's rows when it holds the shard and its fence's grantUntil is still
// ahead (shm.Fence.Allows of an entry of the current version). At the end, once the survivors
// have run a few rounds with time moving, every shard is owned by a live node that holds it.

const (
	modelShards = 24
	modelTTL    = 8 * time.Second
)

type modelNode struct {
	id    string
	m     *cluster.Member
	seg   *shm.Segment
	alive bool // started and not stopped or killed
	gen   int  // restarts, for the incarnation
}

func FuzzClusterMembership(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0, 4, 1, 2, 5, 9, 0, 1, 2})
	f.Add([]byte{6, 0, 3, 3, 3, 1, 2, 0, 7, 1, 3, 3, 3, 3, 2, 1, 0})
	f.Add([]byte{0, 1, 2, 10, 3, 3, 3, 3, 3, 3, 1, 2, 11, 0, 1, 2})
	f.Fuzz(runClusterModel)
}

func runClusterModel(t *testing.T, ops []byte) {
	{
		if len(ops) > 200 {
			ops = ops[:200]
		}
		reg := clustertest.NewMemRegistry(modelShards, time.UnixMilli(1_800_000_000_000))
		dir := t.TempDir()
		nodes := make([]*modelNode, 3)
		start := func(n *modelNode) {
			n.gen++
			seg, err := shm.Create(filepath.Join(dir, fmt.Sprintf("%s-%d", n.id, n.gen)), shm.Options{Workers: 1, ReadyCapacity: 8, LeaseCapacity: 64, EpochMs: reg.Now().UnixMilli()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { seg.Close() })
			w, _ := seg.Worker(0)
			n.seg = seg
			n.m = cluster.NewMember(cluster.Options{
				Registry: reg, ID: n.id, Addr: n.id, Incarnation: fmt.Sprintf("%s/%d", n.id, n.gen), TTL: modelTTL,
				Shards: modelShards, Owned: func(context.Context, []int32, []int64) error { return nil },
				Fence: seg.Fence(), Leases: seg.Leases(), Worker: w, Now: reg.Now, Log: zerolog.Nop(),
				After: func(d time.Duration) <-chan time.Time {
					reg.Advance(d)
					c := make(chan time.Time, 1)
					c <- reg.Now()
					return c
				},
				Ticks: make(chan time.Time),
			})
			if err := n.m.Start(context.Background()); err != nil {
				t.Fatalf("start %s: %v", n.id, err)
			}
			t.Cleanup(n.m.Stop)
			n.alive = true
		}
		for i := range nodes {
			nodes[i] = &modelNode{id: fmt.Sprintf("node-%c", 'a'+i)}
		}
		start(nodes[0])
		check := func(step string) {
			now := reg.Now().UnixMilli()
			grantable := map[int32][]string{}
			for _, n := range nodes {
				if n.m == nil {
					continue
				}
				shards, _ := n.m.Held()
				if !n.seg.Fence().Allows(n.seg.Fence().Version(), now) {
					continue
				}
				for _, sh := range shards {
					grantable[sh] = append(grantable[sh], n.id)
				}
			}
			for sh, ids := range grantable {
				if len(ids) > 1 {
					t.Fatalf("after %s: shard %d grantable by %v at once", step, sh, ids)
				}
			}
		}
		for i, op := range ops {
			n := nodes[int(op>>4)%3]
			var step string
			switch op % 12 {
			case 0, 1, 2: // a round of node op%3
				n = nodes[op%3]
				if n.alive {
					n.m.Tick(context.Background())
				}
				step = "tick " + n.id
			case 3: // time passes, up to half a TTL
				d := time.Duration(1+int(op>>4)) * modelTTL / 32
				reg.Advance(d)
				step = "advance " + d.String()
			case 4, 5: // a round of every live node
				for _, m := range nodes {
					if m.alive {
						m.m.Tick(context.Background())
					}
				}
				step = "tick all"
			case 6, 7: // a node starts (again)
				if !n.alive {
					start(n)
				}
				step = "start " + n.id
			case 8: // a graceful stop: hands its shards over
				if n.alive {
					n.m.Stop()
					n.alive = false
				}
				step = "stop " + n.id
			case 9: // kill -9: never heard from again (its memory stays as it was)
				if n.alive {
					n.alive = false
				}
				step = "kill " + n.id
			case 10, 11: // a long pause: a TTL and more passes without its rounds
				reg.Advance(modelTTL + modelTTL/4)
				step = "pause"
			}
			check(fmt.Sprintf("op %d (%s)", i, step))
		}
		// The survivors settle: every shard is owned by a live node that holds it.
		if !slices.ContainsFunc(nodes, func(n *modelNode) bool { return n.alive }) {
			start(nodes[0])
		}
		for range 4 {
			reg.Advance(modelTTL / 2)
			for _, n := range nodes {
				if n.alive {
					n.m.Tick(context.Background())
				}
			}
			check("settling")
		}
		v, _ := reg.ReadView(context.Background())
		for _, l := range v.Leases {
			var owner *modelNode
			for _, n := range nodes {
				if n.alive && n.id == l.Owner {
					owner = n
				}
			}
			if owner == nil || !l.ExpiresAt.After(v.Now) {
				t.Fatalf("after settling, shard %d is %+v: not held by a live node", l.Shard, l)
			}
			if shards, _ := owner.m.Held(); !slices.Contains(shards, l.Shard) {
				t.Fatalf("after settling, %s owns shard %d in the registry but does not hold it", owner.id, l.Shard)
			}
		}
	}
}
