package apply

import (
	"errors"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// fenceNode is worker 0's writers over one store, wired as worker 0 wires them: one intake.KeyLocks,
// every write through one sweep.Changes.
type fenceNode struct {
	*qtest.Env
	signals *intake.TestSignals
	locks   *intake.KeyLocks
	targets *intake.Targets
	applier *Applier
	waiting chan struct{} // a lock had to wait
}

const fenceYAML = "routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\nqueue: {release_grace: 5s, ready: {sweep_interval: 10s}}\n"

func newFenceNode(t *testing.T, yaml string) *fenceNode {
	e := qtest.New(t, yaml, start, shm.Options{})
	n := &fenceNode{Env: e, signals: &intake.TestSignals{}, waiting: make(chan struct{}, 8)}
	n.locks = &intake.KeyLocks{Test: n.signals}
	n.signals.LockWait = func() { n.waiting <- struct{}{} }
	writer := sweep.NewChanges().Wrap(e.Store)
	n.targets = mustTargets(t, intake.TargetsDeps{Store: e.Store, Writer: writer, Deleter: writer, Locks: n.locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	n.applier = newApplier(t, ApplierDeps{Store: e.Store, Writer: writer, Locks: n.locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Test: n.signals})
	return n
}

// upsert files one item as POST /v1/targets does.
func (n *fenceNode) upsert(it wire.TargetItem) error {
	p, err := intake.ParseItem(&it, intake.KeyingOf(qtest.Settings(n, IntakeSettingsOf)()))
	if err != nil {
		return err
	}
	var rejected error
	if _, err := n.targets.Upsert([]intake.Item{p}, func(_ int, _, msg string) { rejected = errors.New(msg) }); err != nil {
		return err
	}
	return rejected
}

// inWindow runs op between the applier's reads and its commit (qtest.InWindow).
func (n *fenceNode) inWindow(op func()) chan struct{} {
	return qtest.InWindow(&n.signals.AfterDecide, n.waiting, op)
}

const shoes = "https://shop.test/c/shoes"

var shoesKey = []byte("desktop|" + shoes)

func apply(n *fenceNode, lease wire.Lease) (wire.ApplyStats, error) {
	return n.applier.Apply([]wire.Result{{Key: shoesKey, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}})
}

// An operator's upsert that lands while a render result for the same target is being applied
// must not be lost: the result's write must not carry the state it read before the upsert.
// The upsert is started between the applier's reads and its commit; the test then waits until
// the upsert has either committed (the race happened) or is waiting for the key (it is
// serialised behind the result), which involves no timing.
func TestResultDoesNotOverwriteAConcurrentUpsert(t *testing.T) {
	n := newFenceNode(t, "")
	if err := n.upsert(wire.TargetItem{URL: shoes, Interval: []byte(`"12h"`), Source: "sitemap"}); err != nil {
		t.Fatal(err)
	}
	var upsertErr error
	upserted := n.inWindow(func() {
		upsertErr = n.upsert(wire.TargetItem{URL: shoes, Interval: []byte(`"2h"`), Source: "sitemap"})
	})
	if _, err := apply(n, grant(t, n.Env, shoesKey)); err != nil {
		t.Fatal(err)
	}
	<-upserted
	if upsertErr != nil {
		t.Fatal(upsertErr)
	}
	row, err := n.Store.GetSchedule(shoesKey)
	if err != nil {
		t.Fatal(err)
	}
	tgt, _ := n.Store.GetTarget(shoesKey)
	if row.EffectiveIntervalMs != 2*hour || tgt.StoredIntervalMs != 2*hour {
		t.Fatalf("the operator's 2h interval was lost: row carries %v ms, target stores %v ms", row.EffectiveIntervalMs, tgt.StoredIntervalMs)
	}
	if tgt.LastRender.Status != 200 {
		t.Fatalf("the result was lost: %+v", tgt.LastRender)
	}
}

// A delete that lands between a result's decision and its commit must stay deleted: before,
// the result's commit brought the row, the target and the page back, after the delete said so.
func TestDeleteBetweenAResultsDecisionAndCommitStays(t *testing.T) {
	n := newFenceNode(t, fenceYAML)
	n.upsert(wire.TargetItem{URL: shoes, Source: "sitemap"})
	lease := grant(t, n.Env, shoesKey)
	var delErr error
	done := n.inWindow(func() { delErr = n.targets.Delete(shoesKey) })
	if _, err := apply(n, lease); err != nil {
		t.Fatal(err)
	}
	<-done
	if delErr != nil {
		t.Fatalf("delete: %v", delErr)
	}
	if _, err := n.Store.GetSchedule(shoesKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted row is back: %v", err)
	}
	if _, err := n.Store.GetTarget(shoesKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted target is back: %v", err)
	}
	if _, err := n.Store.GetPage(shoesKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted page is back: %v", err)
	}
}

// A delete while the render is in flight: the render's result is fenced, and the entry of the
// ready set published before the delete is not granted for the hold (two sweep intervals).
func TestDeleteRevokesTheLeaseAndHoldsTheKey(t *testing.T) {
	n := newFenceNode(t, fenceYAML)
	n.upsert(wire.TargetItem{URL: shoes, Source: "sitemap"})
	lease := grant(t, n.Env, shoesKey)
	if err := n.targets.Delete(shoesKey); err != nil {
		t.Fatalf("delete: %v", err)
	}
	st, err := apply(n, lease)
	if err != nil || st.Fenced != 1 {
		t.Fatalf("the in-flight render's result: %+v %v, want fenced", st, err)
	}
	h := shm.KeyHash(shoesKey)
	if _, s := n.Seg.Leases().Acquire(h, n.Now()+20_000-1, 600_000, 9); s != shm.Held {
		t.Fatalf("a stale ready-set entry granted inside the hold: %v", s)
	}
	if _, s := n.Seg.Leases().Acquire(h, n.Now()+20_000, 600_000, 9); s != shm.Acquired {
		t.Fatalf("the key after the hold: %v", s)
	}
}

// A rush while the render is in flight is not undone by that render's result: the urgent
// mark and the due time stay, the result is fenced, and the key is granted again once the
// release grace has passed. The same for wait: the result does not store the page it dropped.
func TestRushAndWaitAfterTheClaimSurviveTheResult(t *testing.T) {
	for _, mode := range []string{"rush", "wait"} {
		t.Run(mode, func(t *testing.T) {
			n := newFenceNode(t, fenceYAML)
			n.upsert(wire.TargetItem{URL: shoes, Source: "sitemap", Due: "2030-01-01T00:00:00Z"})
			lease := grant(t, n.Env, shoesKey)
			if _, err := n.targets.Prioritize(wire.PrioritizeRequest{URL: shoes, Mode: mode}); err != nil {
				t.Fatalf("prioritize: %v", err)
			}
			before, _ := n.Store.GetSchedule(shoesKey)
			n.Advance(1000)
			st, err := apply(n, lease)
			if err != nil || st.Fenced != 1 {
				t.Fatalf("the result of the render granted before the %s: %+v %v, want fenced", mode, st, err)
			}
			if row, _ := n.Store.GetSchedule(shoesKey); row != before {
				t.Fatalf("the %s was undone: %+v, was %+v", mode, row, before)
			}
			if mode == "rush" && (!before.Lanes.Urgent || before.DueAtMs != start) {
				t.Fatalf("rushed row %+v", before)
			}
			if _, err := n.Store.GetPage(shoesKey); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the fenced result stored its page: %v", err)
			}
			h := shm.KeyHash(shoesKey)
			if _, s := n.Seg.Leases().Acquire(h, start+5_000, 600_000, 9); s != shm.Acquired {
				t.Fatalf("the %sed key after the release grace: %v", mode, s)
			}
		})
	}
}

// A rush that arrives while a result is between its decision and its commit waits for it, and
// is applied over it: the result (granted before) is applied, then the rush stands.
func TestRushDuringAResultsCommitIsAppliedAfterIt(t *testing.T) {
	n := newFenceNode(t, fenceYAML)
	n.upsert(wire.TargetItem{URL: shoes, Source: "sitemap"})
	lease := grant(t, n.Env, shoesKey)
	var rushErr error
	done := n.inWindow(func() { _, rushErr = n.targets.Prioritize(wire.PrioritizeRequest{URL: shoes, Mode: "rush"}) })
	st, err := apply(n, lease)
	<-done
	if err != nil || st.Applied != 1 || rushErr != nil {
		t.Fatalf("result %+v %v, rush %v", st, err, rushErr)
	}
	row, _ := n.Store.GetSchedule(shoesKey)
	if !row.Lanes.Urgent || row.DueAtMs != n.Now() {
		t.Fatalf("the rush after the result did not stand: %+v", row)
	}
}
