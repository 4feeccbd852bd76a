package apply

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

const (
	hour  = qtest.Hour
	start = int64(1_800_000_000_000)
)

// BenchmarkApply measures worker 0's cost per result: its lease checked and held through the
// commit, two point reads, the policy decision, its share of one batched funnel commit and the
// lease's release, for batches of 256. Each result carries a lease granted as a render
// worker's claim would (outside the timer): a result without one is fenced, which costs a
// fraction of applying it and would make this measure the refusal instead.
func BenchmarkApply(b *testing.B) {
	e := qtest.New(b, "", start, shm.Options{})
	const rows = 10_000
	keys := make([][]byte, rows)
	ws := make([]store.Write, rows)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "desktop|https://shop.test/c/item-%06d", i)
		sch, _ := store.NewSchedule(keys[i], start-hour, true, 0, store.Lanes{})
		ws[i] = store.Write{Schedule: sch, Target: &store.Target{URL: string(keys[i][8:]), Device: "desktop", Source: store.SourceSitemap}}
	}
	if err := e.Store.WriteSchedules(ws); err != nil {
		b.Fatal(err)
	}
	a := newApplier(b, ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	body := make([]byte, 2048)
	batch := make([]wire.Result, 256)
	grace := e.Config().Queue.ReleaseGrace.Ms()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(batch) {
		b.StopTimer()
		for i := range batch {
			key := keys[(done+i)%rows]
			batch[i] = wire.Result{Key: key, Outcome: "ok", Status: 200, Body: body, Lease: intake.WireLease(e.Grant(key))}
		}
		b.StartTimer()
		st, err := a.Apply(batch)
		if err != nil {
			b.Fatal(err)
		}
		if st.Fenced > 0 {
			b.Fatalf("%d results fenced: the benchmark must measure applying them", st.Fenced)
		}
		e.Advance(grace + 1) // past the released leases' grace, so the keys can be granted again
	}
}
