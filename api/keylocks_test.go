package api

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// An operator's upsert that lands while a render result for the same target is being applied
// must not be lost: the result's write must not carry the state it read before the upsert.
// The upsert is started between the applier's reads and its commit; the test then waits until
// the upsert has either committed (the race happened) or is waiting for the key (it is
// serialised behind the result), which involves no timing.
func TestResultDoesNotOverwriteAConcurrentUpsert(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	locks := &KeyLocks{}
	waiting := make(chan struct{}, 8)
	locks.onWait = func() { waiting <- struct{}{} }
	targets := &Targets{Store: e.Store, Writer: e.Store, Locks: locks, Policy: e.Policy, Now: e.Now}
	mux := http.NewServeMux()
	targets.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(body string) {
		resp, err := http.Post(srv.URL+"/v1/targets", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	post(`[{"url": "https://shop.test/c/x", "interval": "12h", "source": "sitemap"}]`)
	key := []byte("desktop|https://shop.test/c/x")

	upserted := make(chan struct{})
	a := &Applier{Store: e.Store, Seg: e.Seg, Locks: locks, Policy: e.Policy, Now: e.Now}
	a.afterDecide = func() {
		go func() {
			post(`[{"url": "https://shop.test/c/x", "interval": "2h", "source": "sitemap"}]`)
			close(upserted)
		}()
		select {
		case <-upserted: // committed inside the result's read-to-write window: the race
		case <-waiting: // serialised behind the result
		}
	}
	lease := grant(t, e, key)
	if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}}); err != nil {
		t.Fatal(err)
	}
	<-upserted
	row, err := e.Store.GetSchedule(key)
	if err != nil {
		t.Fatal(err)
	}
	tgt, _ := e.Store.GetTarget(key)
	if row.EffectiveIntervalMs != 2*hour || tgt.StoredIntervalMs != 2*hour {
		t.Fatalf("the operator's 2h interval was lost: row carries %v ms, target stores %v ms", row.EffectiveIntervalMs, tgt.StoredIntervalMs)
	}
	if tgt.LastRender.Status != 200 {
		t.Fatalf("the result was lost: %+v", tgt.LastRender)
	}
}

// Result batches are applied concurrently, 256 keys each. Two sequences over disjoint keys must
// never wait for each other; locks striped by hash made two such batches share a stripe almost
// always, and so applied them one after the other.
func TestKeyLocksDisjointKeysNeverWait(t *testing.T) {
	locks := &KeyLocks{}
	waited := make(chan struct{}, 1)
	locks.onWait = func() { waited <- struct{}{} }
	batch := func(from int) [][]byte {
		keys := make([][]byte, 256)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "desktop|https://shop.test/c/item-%06d", from+i)
		}
		return keys
	}
	for b := 1; b < 8; b++ {
		unlockFirst := locks.Lock(batch(0))
		acquired := make(chan func())
		go func() { acquired <- locks.Lock(batch(b * 256)) }()
		select {
		case unlock := <-acquired:
			unlock()
			unlockFirst()
		case <-waited:
			unlockFirst()
			(<-acquired)()
			t.Fatalf("batch %d waited for batch 0, with which it shares no key", b)
		}
	}
}

// A sequence that shares one key with a held one waits for it, whatever order its keys come
// in, and proceeds once it is released.
func TestKeyLocksOverlappingKeysWait(t *testing.T) {
	locks := &KeyLocks{}
	waiting := make(chan struct{}, 1)
	locks.onWait = func() { waiting <- struct{}{} }
	a, b, c := []byte("desktop|a"), []byte("desktop|b"), []byte("desktop|c")
	unlockFirst := locks.Lock([][]byte{a, b})
	var second atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		unlock := locks.Lock([][]byte{c, b, c}) // b is held; c twice is one key
		second.Store(true)
		unlock()
	}()
	<-waiting
	if second.Load() {
		t.Fatal("the second sequence took a held key")
	}
	unlockFirst()
	<-done
	if !second.Load() {
		t.Fatal("the second sequence never ran")
	}
	locks.Lock([][]byte{a, b, c})() // everything was released
}

// Under contention from many sequences over random, overlapping key sets, no key is ever held
// by two sequences at once, and every sequence finishes (no deadlock).
func TestKeyLocksMutualExclusion(t *testing.T) {
	locks := &KeyLocks{}
	const nkeys = 40
	var owner [nkeys]atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				idx := rng.Perm(nkeys)[:1+rng.IntN(6)]
				keys := make([][]byte, len(idx))
				for i, k := range idx {
					keys[i] = fmt.Appendf(nil, "desktop|k%d", k)
				}
				unlock := locks.Lock(keys)
				for _, k := range idx {
					if !owner[k].CompareAndSwap(0, int32(g+1)) {
						t.Errorf("key %d held by sequence %d and %d at once", k, owner[k].Load()-1, g)
					}
				}
				for _, k := range idx {
					owner[k].Store(0)
				}
				unlock()
			}
		}()
	}
	wg.Wait()
}
