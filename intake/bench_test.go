package intake

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// BenchmarkApply measures worker 0's cost per result: two point reads, the policy decision and
// its share of one batched funnel commit, for batches of 256.
const (
	hour  = qtest.Hour
	start = int64(1_800_000_000_000)
)

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
	a := &Applier{Store: e.Store, Seg: e.Seg, Policy: e.Policy, Now: e.Now}
	body := make([]byte, 2048)
	batch := make([]wire.Result, 256)
	b.ResetTimer()
	for done := 0; done < b.N; done += len(batch) {
		for i := range batch {
			batch[i] = wire.Result{Key: keys[(done+i)%rows], Outcome: "ok", Status: 200, Body: body}
		}
		if _, err := a.Apply(batch); err != nil {
			b.Fatal(err)
		}
	}
}
