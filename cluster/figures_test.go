package cluster_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	. "github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/cluster/clustertest"
	"github.com/freshq/freshq/shm"
)

// figureRegistry is a MemRegistry that keeps the figures each heartbeat carried.
type figureRegistry struct {
	*clustertest.MemRegistry
	beats   int
	figures []string
}

func (r *figureRegistry) Heartbeat(ctx context.Context, id, inc string) error {
	r.beats++
	return r.MemRegistry.Heartbeat(ctx, id, inc)
}

func (r *figureRegistry) HeartbeatFigures(ctx context.Context, id, inc string, figures []byte) error {
	r.figures = append(r.figures, string(figures))
	return r.MemRegistry.Heartbeat(ctx, id, inc)
}

// Every tick's heartbeat carries the node's figures as they are at that tick; a node with no
// figures yet (nil) heartbeats without them, and the registry keeps what it had.
func TestHeartbeatCarriesFigures(t *testing.T) {
	reg := &figureRegistry{MemRegistry: clustertest.NewMemRegistry(testShards, time.UnixMilli(1_800_000_000_000))}
	seg, err := shm.Create(filepath.Join(t.TempDir(), "seg"), shm.Options{Workers: 1, EpochMs: reg.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	w, _ := seg.Worker(0)
	var figures []byte // nil: none yet
	m := NewMember(Options{
		Registry: reg, ID: "node-a", Addr: "a", Incarnation: "1", TTL: 10 * time.Second, Shards: testShards,
		Owned: func(context.Context, []int32, []int64) error { return nil },
		Fence: seg.Fence(), Leases: seg.Leases(), Worker: w, Now: reg.Now, Log: zerolog.Nop(),
		Ticks:     make(chan time.Time),
		Mono:      func() time.Duration { return reg.Now().Sub(time.UnixMilli(0)) },
		AfterFunc: func(time.Duration, func()) func() bool { return func() bool { return true } },
		Figures:   func() []byte { return figures },
	})
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if reg.beats != 1 || len(reg.figures) != 0 {
		t.Fatalf("first tick without figures: %d plain heartbeats, figures %q", reg.beats, reg.figures)
	}
	figures = []byte(`{"renders":1}`)
	m.Tick(ctx)
	figures = []byte(`{"renders":2}`)
	m.Tick(ctx)
	if reg.beats != 1 || len(reg.figures) != 2 || reg.figures[0] != `{"renders":1}` || reg.figures[1] != `{"renders":2}` {
		t.Fatalf("heartbeats %d, figures %q: want each tick's own figures", reg.beats, reg.figures)
	}
}
