package apply

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// grant leases key for a result that is to be applied (qtest.Env.Grant), in its wire form.
func grant(t testing.TB, e *qtest.Env, key []byte) wire.Lease {
	t.Helper()
	return intake.WireLease(e.Grant(key))
}

// modifyFunc is an intake.Writer of a test whose read-modify-write is f; it has no batched puts.
type modifyFunc func([]store.Change) ([]bool, error)

func (f modifyFunc) Modify(cs []store.Change) ([]bool, error) { return f(cs) }
func (f modifyFunc) WriteSchedules([]store.Write) error {
	return errors.New("modifyFunc has no WriteSchedules")
}

// A lease that would lapse while its result commits is held through the commit: no other grant
// of the key can be made meanwhile, and the result is applied under the grant it carries.
func TestApplyHoldsTheLeaseThroughTheCommit(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/c/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	h := shm.KeyHash(key)
	l, st := e.Seg.Leases().Acquire(h, e.Now(), 1000, 1) // lapses in a second
	if st != shm.Acquired {
		t.Fatal(st)
	}
	var during shm.AcquireStatus
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now,
		Writer: modifyFunc(func(cs []store.Change) ([]bool, error) {
			e.Advance(2000) // the commit outlasts the lease's TTL
			_, during = e.Seg.Leases().Acquire(h, e.Now(), 600_000, 2)
			return e.Store.Modify(cs)
		})})
	res, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Lease: intake.WireLease(l)}})
	if err != nil || res.Applied != 1 {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if during != shm.Held {
		t.Fatalf("another grant while the result committed: %v, want held", during)
	}
	if info, ok := e.Seg.Leases().Lookup(h, e.Now()); !ok || !info.Released {
		t.Fatalf("after the commit: %+v %v, want the release grace", info, ok)
	}
}

// When the funnel commits part of a batch and fails the rest, the leases of the results that
// committed are released: the retry of the batch finds them fenced and applies only the rest.
func TestApplyReleasesTheLeasesOfWhatCommitted(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	var rs []wire.Result
	for i := range 2 {
		key := []byte(fmt.Sprintf("desktop|https://a.test/c/%d", i))
		e.Put(string(key), start-hour, false, 0, store.Lanes{})
		rs = append(rs, wire.Result{Key: key, Outcome: "ok", Status: 200, Lease: grant(t, e, key)})
	}
	fail := true
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now,
		Writer: modifyFunc(func(cs []store.Change) ([]bool, error) {
			if !fail {
				return e.Store.Modify(cs)
			}
			fail = false
			if _, err := e.Store.Modify(cs[:1]); err != nil {
				return nil, err
			}
			return nil, &store.PartialWriteError{Committed: []bool{true, false}, Err: fmt.Errorf("store: commit 1 writes: disk full")}
		})})
	if _, err := a.Apply(rs); err == nil {
		t.Fatal("a partly failed commit reported no error")
	}
	if err := e.Seg.Leases().Check(intake.ShmLease(rs[0].Lease), shm.KeyHash(rs[0].Key), e.Now()); err == nil {
		t.Fatal("the committed result's lease is still held")
	}
	if err := e.Seg.Leases().Check(intake.ShmLease(rs[1].Lease), shm.KeyHash(rs[1].Key), e.Now()); err != nil {
		t.Fatalf("the uncommitted result's lease: %v", err)
	}
	st, err := a.Apply(rs) // the sender's retry
	if err != nil || st.Applied != 1 || st.Fenced != 1 || st.FencedItems[0].Index != 0 {
		t.Fatalf("retry: %+v %v, want the committed one fenced and the other applied", st, err)
	}
}

// One page the store cannot hold fails its own row, as too_large; the rest of the batch
// applies. Before, the store refused the whole batch, which was answered 503, retried, dropped.
func TestAnOversizedPageFailsOnlyItsOwnResult(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	big, small := []byte("desktop|https://a.test/c/big"), []byte("desktop|https://a.test/c/small")
	e.Put(string(big), start-hour, true, 0, store.Lanes{NeverRendered: true})
	e.Put(string(small), start-hour, true, 0, store.Lanes{NeverRendered: true})
	st, err := a.Apply([]wire.Result{
		{Key: big, Outcome: "ok", Status: 200, Body: make([]byte, store.MaxPageBody+1), Lease: grant(t, e, big)},
		{Key: small, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: grant(t, e, small),
			Headers: map[string]string{"content-type": "text/html", "etag": strings.Repeat("e", store.MaxHeaderLen+1)}},
	})
	if err != nil || st.Applied != 2 {
		t.Fatalf("apply: %+v %v", st, err)
	}
	if _, err := e.Store.GetPage(big); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the oversized page was stored: %v", err)
	}
	tgt, _ := e.Store.GetTarget(big)
	if tgt.Failures.Count != 1 || tgt.Failures.LastClass != "transient" {
		t.Fatalf("the oversized result's failure: %+v", tgt.Failures)
	}
	page, err := e.Store.GetPage(small)
	if err != nil || len(page.Headers) != 1 {
		t.Fatalf("the other result's page (an over-long header left out): %+v %v", page, err)
	}
}

// A result whose key's shard the node no longer holds (the funnel reports store.Current's
// NotOwner, as a cluster's store does) is fenced, named by its index, and filed nowhere; the
// other results of the batch are applied.
func TestApplyFencesAResultOfAShardTheNodeLost(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	kept, lost := []byte("desktop|https://a.test/c/kept"), []byte("desktop|https://a.test/c/lost")
	for _, k := range [][]byte{kept, lost} {
		e.Put(string(k), start-hour, false, 0, store.Lanes{})
	}
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now,
		Writer: modifyFunc(func(cs []store.Change) ([]bool, error) {
			applied := make([]bool, len(cs))
			for i, c := range cs {
				row, err := e.Store.GetSchedule(c.Key)
				if err != nil {
					return nil, err
				}
				cur := store.Current{Row: row, HasRow: true, NotOwner: string(c.Key) == string(lost)}
				w, ok, err := c.Decide(cur)
				if err != nil {
					return nil, err
				}
				if ok && !cur.NotOwner {
					if err := e.Store.WriteSchedules([]store.Write{w}); err != nil {
						return nil, err
					}
					applied[i] = true
				}
			}
			return applied, nil
		})})
	res, err := a.Apply([]wire.Result{
		{Key: lost, Outcome: "ok", Status: 200, Lease: grant(t, e, lost)},
		{Key: kept, Outcome: "ok", Status: 200, Lease: grant(t, e, kept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 1 || res.Fenced != 1 || res.Skipped != 0 || len(res.FencedItems) != 1 || res.FencedItems[0].Index != 0 ||
		!strings.Contains(res.FencedItems[0].Error, "shard") {
		t.Fatalf("apply: %+v, want the kept result applied and the lost one fenced (index 0, naming the shard)", res)
	}
	if row, _ := e.Store.GetSchedule(lost); row.DueAtMs != start-hour {
		t.Fatalf("the lost shard's row was changed: due %d", row.DueAtMs)
	}
}
