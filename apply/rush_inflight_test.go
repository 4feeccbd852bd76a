package apply

import (
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// A rush a reader asked for (a page missing or stale: render on miss, the crawler listener)
// leaves a render of the key already in flight alone: that render brings the page, and its
// result is applied. An operator's rush of the same key wins over the render, whose result is
// fenced. (A render claimed just before the reader's rush is written is what this keeps from
// being rendered twice.)
func TestReaderRushKeepsTheRenderInFlight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rush      func(tg *intake.Targets, key []byte) (bool, error)
		wantFence bool
	}{
		{"reader", (*intake.Targets).RushForReader, false},
		{"operator", func(tg *intake.Targets, _ []byte) (bool, error) {
			n, err := tg.Prioritize(wire.PrioritizeRequest{Mode: "rush", URL: "https://a.test/c/1", Device: "desktop"})
			return n == 1, err
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := qtest.New(t, "", start, shm.Options{})
			key := []byte("desktop|https://a.test/c/1")
			e.Put(string(key), start-hour, false, 0, store.Lanes{})
			l := grant(t, e, key) // the render in flight
			tg := mustTargets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
			if rushed, err := tc.rush(tg, key); err != nil || !rushed {
				t.Fatalf("rush: %v, %v", rushed, err)
			}
			row, err := e.Store.GetSchedule(key)
			if err != nil || !row.Lanes.Urgent {
				t.Fatalf("the rushed row: %+v, %v", row, err)
			}
			li, held := e.Seg.Leases().Lookup(shm.KeyHash(key), e.Now())
			if live := held && !li.Released; live == tc.wantFence {
				t.Fatalf("the render's lease live after the rush: %v, want %v", live, !tc.wantFence)
			}
			a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
			rep, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: l}})
			if err != nil {
				t.Fatal(err)
			}
			if fenced := rep.Fenced == 1; fenced != tc.wantFence {
				t.Fatalf("the render's result: %+v, fenced %v, want %v", rep, fenced, tc.wantFence)
			}
		})
	}
}
