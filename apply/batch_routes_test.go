package apply

import (
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// Each result of a batch is decided under its own key's route: a batch of pages of two
// routes files each row with its own route's cadence.
func TestApplyBatchDecidesEachResultUnderItsRoute(t *testing.T) {
	e := qtest.New(t, `
queue: {policy: ready}
routes:
  - {name: fast, match: prefix, path: /fast/, interval: 1h}
  - {name: slow, match: prefix, path: /slow/, interval: 6h}
`, start, shm.Options{})
	keys := [][]byte{[]byte("desktop|https://a.test/fast/1"), []byte("desktop|https://a.test/slow/1")}
	for _, k := range keys {
		e.Put(string(k), start-hour, false, 0, store.Lanes{})
	}
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	batch := make([]wire.Result, len(keys))
	for i, k := range keys {
		batch[i] = wire.Result{Key: k, Outcome: "ok", Status: 200, Body: []byte("<p>a page</p>"), Lease: grant(t, e, k)}
	}
	if st, err := a.Apply(batch); err != nil || st.Applied != 2 {
		t.Fatalf("apply: %+v %v", st, err)
	}
	for i, want := range []int64{hour, 6 * hour} {
		row, err := e.Store.GetSchedule(keys[i])
		if err != nil {
			t.Fatal(err)
		}
		if row.EffectiveIntervalMs != want || row.DueAtMs != e.Now()+want {
			t.Errorf("%s: cadence %d due %d, want its route's %d from now (%d)", keys[i], row.EffectiveIntervalMs, row.DueAtMs, want, e.Now())
		}
	}
}
