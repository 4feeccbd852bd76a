package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/cluster"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
)

// events records, in order, what worker 0's injected parts were asked to do.
type events struct {
	mu  sync.Mutex
	got []string
}

func (ev *events) add(s string) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.got = append(ev.got, s)
}

func (ev *events) service(name string) startstop.Service {
	return startstop.Func{
		StartFunc: func(context.Context) error { ev.add("start " + name); return nil },
		StopFunc:  func() { ev.add("stop " + name) },
	}
}

// closingStore records the store's close.
type closingStore struct {
	store.Store
	ev *events
}

func (c closingStore) Close() error { c.ev.add("close store"); return c.Store.Close() }

// Worker 0's list starts the cluster's services after the store opens, and stops them as the
// stop order says: the farm, then the membership (which hands the node's shards over at once),
// then the miss watch, and the store closes last, after all of them.
func TestWorker0StartsAndStopsItsPartsInOrder(t *testing.T) {
	dir, err := os.MkdirTemp("", "w0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	seg, err := shm.Create(filepath.Join(dir, "seg"), shm.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	w, err := seg.Worker(0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	f, err := NewInForce(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[InForce]
	cur.Store(f)
	ev := &events{}
	n := New(Settings{Index: 0, Socket: filepath.Join(dir, "w0.sock"), InForce: &cur, Reloads: make(chan struct{})},
		Deps{Seg: seg, Worker: w, Log: zerolog.Nop(), Now: func() int64 { return 1 << 40 },
			OpenStore: func(_ context.Context, cfg *config.Config) (store.Store, cluster.Engine, error) {
				ev.add("open store")
				st, err := badgerstore.Open(filepath.Join(cfg.DataDir, "db"), &badgerstore.Options{Floor: seg.Floor()})
				if err != nil {
					return nil, nil, err
				}
				return closingStore{Store: st, ev: ev}, nil, nil
			},
			GrantLog: func(*config.Config) (*grantlog.Log, func([]byte, int64)) { return nil, nil },
			Cluster: Cluster{
				Services: func(*config.Config, cluster.Engine, *grantlog.Log, *hosts.Tracker, *capacity.Service) (startstop.Service, startstop.Service) {
					return ev.service("member"), ev.service("farm")
				},
				MissWatch: func(cluster.Engine, *misses.Flights) startstop.Service { return ev.service("watch") },
				View:      func(cluster.Engine, *config.Config, func() float64) api.ClusterViewFunc { return nil },
			}})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.Stop()
	want := []string{"open store", "start member", "start farm", "start watch",
		"stop farm", "stop member", "stop watch", "close store"}
	if !slices.Equal(ev.got, want) {
		t.Fatalf("got %q, want %q", ev.got, want)
	}
}
