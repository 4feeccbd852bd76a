package intake

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/freshq/freshq/store"
)

const (
	sixHours  = int64(6 * 3_600_000)
	threeMins = int64(3 * 60_000)
)

// putRendered files key as a render at renderedAt with cadence carried would have: due one
// cadence later.
func putRendered(t *testing.T, st store.Store, key string, renderedAt, carried int64, lanes store.Lanes) {
	t.Helper()
	putFiled(t, st, key, renderedAt, renderedAt+carried, carried, lanes)
}

// putFiled files key due at due, carrying carried, with its target's last render at renderedAt.
func putFiled(t *testing.T, st store.Store, key string, renderedAt, due, carried int64, lanes store.Lanes) {
	t.Helper()
	sch, err := store.NewSchedule([]byte(key), due, true, carried, lanes)
	if err != nil {
		t.Fatal(err)
	}
	w := store.Write{Schedule: sch, Target: &store.Target{URL: key[len("desktop|"):], Device: "desktop", Source: store.SourceAPI,
		LastRender: store.RenderSummary{Status: 200, AtMs: renderedAt}}}
	if err := st.WriteSchedules([]store.Write{w}); err != nil {
		t.Fatal(err)
	}
}

func rowOf(t *testing.T, st store.Store, key string) store.Row {
	t.Helper()
	r, err := st.GetSchedule([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A route's interval cut from 6 h to 3 m: its rows rendered at 6 h are refiled carrying 3 m,
// due 3 m after their render (overdue, when that has passed); rows of another route, failing rows
// and never-rendered ones keep theirs. A second run moves nothing. A lengthened interval moves
// nothing.
func TestRescheduleMovesRowsAShortenedIntervalLeftLate(t *testing.T) {
	const six = "routes:\n  - {name: c, match: prefix, path: /c/, interval: 6h}\n  - {name: o, match: prefix, path: /o/, interval: 6h}\n"
	const three = "routes:\n  - {name: c, match: prefix, path: /c/, interval: 3m}\n  - {name: o, match: prefix, path: /o/, interval: 6h}\n"
	e, svc := newTargets(t)
	e.Reload(six)
	now := e.Now()
	recent, old := now-60_000, now-10*60_000 // rendered 1 and 10 minutes ago
	putRendered(t, e.Store, "desktop|https://a.test/c/recent", recent, sixHours, store.Lanes{})
	putRendered(t, e.Store, "desktop|https://a.test/c/old", old, sixHours, store.Lanes{})
	putRendered(t, e.Store, "desktop|https://a.test/c/failing", old, sixHours, store.Lanes{Failing: true})
	putRendered(t, e.Store, "desktop|https://a.test/c/new", old, sixHours, store.Lanes{NeverRendered: true})
	putRendered(t, e.Store, "desktop|https://a.test/o/other", old, sixHours, store.Lanes{})
	// Filed by freshness at a ceiling stretched ×1.5 for a short capacity: its last render bounds it.
	putFiled(t, e.Store, "desktop|https://a.test/c/stretched", recent, recent+sixHours*3/2, sixHours, store.Lanes{})
	ctx := context.Background()
	if p, err := svc.Reschedule(ctx, nil); err != nil || p.Moved != 0 || p.Scanned != 6 || !p.Done {
		t.Fatalf("under the configuration the rows were filed with: %+v %v", p, err)
	}

	e.Reload(three)
	var seen []RescheduleProgress
	p, err := svc.Reschedule(ctx, func(p RescheduleProgress) { seen = append(seen, p) })
	if err != nil || p.Moved != 3 || p.Scanned != 6 || !p.Done {
		t.Fatalf("after the cut: %+v %v", p, err)
	}
	if len(seen) == 0 || !seen[len(seen)-1].Done || seen[len(seen)-1].Moved != 3 {
		t.Fatalf("progress reported: %+v", seen)
	}
	if r := rowOf(t, e.Store, "desktop|https://a.test/c/stretched"); r.DueAtMs != recent+threeMins {
		t.Fatalf("stretched row: due %d (render +%d)", r.DueAtMs, r.DueAtMs-recent)
	}
	if r := rowOf(t, e.Store, "desktop|https://a.test/c/recent"); r.DueAtMs != recent+threeMins || r.EffectiveIntervalMs != threeMins {
		t.Fatalf("recent row: due %d (render +%d), carries %d", r.DueAtMs, r.DueAtMs-recent, r.EffectiveIntervalMs)
	}
	if r := rowOf(t, e.Store, "desktop|https://a.test/c/old"); r.DueAtMs != old+threeMins || r.EffectiveIntervalMs != threeMins {
		t.Fatalf("old row: due %d (render +%d), carries %d", r.DueAtMs, r.DueAtMs-old, r.EffectiveIntervalMs)
	}
	for _, k := range []string{"desktop|https://a.test/c/failing", "desktop|https://a.test/c/new", "desktop|https://a.test/o/other"} {
		if r := rowOf(t, e.Store, k); r.DueAtMs != old+sixHours || r.EffectiveIntervalMs != sixHours {
			t.Fatalf("%s moved: due %d, carries %d", k, r.DueAtMs, r.EffectiveIntervalMs)
		}
	}
	if p, err := svc.Reschedule(ctx, nil); err != nil || p.Moved != 0 {
		t.Fatalf("a second run: %+v %v", p, err)
	}

	e.Reload(six)
	before := rowOf(t, e.Store, "desktop|https://a.test/c/recent")
	if p, err := svc.Reschedule(ctx, nil); err != nil || p.Moved != 0 {
		t.Fatalf("after lengthening: %+v %v", p, err)
	}
	if r := rowOf(t, e.Store, "desktop|https://a.test/c/recent"); r.DueAtMs != before.DueAtMs {
		t.Fatalf("lengthening moved a row: due %d, was %d", r.DueAtMs, before.DueAtMs)
	}
}

// A run stopped part way (a stop, a crash: here its context ends after the first chunk) leaves
// whole rows only, and the next run finds the rest from the rows themselves and finishes.
func TestRescheduleInterruptedIsFinishedByTheNextRun(t *testing.T) {
	e, svc := newTargets(t)
	e.Reload("routes:\n  - {name: c, match: prefix, path: /c/, interval: 6h}\n")
	now := e.Now()
	const rows = 3*RescheduleChunk + 10
	for i := range rows {
		putRendered(t, e.Store, fmt.Sprintf("desktop|https://a.test/c/%05d", i), now-60_000, sixHours, store.Lanes{})
	}
	e.Reload("routes:\n  - {name: c, match: prefix, path: /c/, interval: 3m}\n")
	ctx, cancel := context.WithCancel(context.Background())
	p, err := svc.Reschedule(ctx, func(RescheduleProgress) { cancel() })
	if !errors.Is(err, context.Canceled) || p.Done || p.Moved != RescheduleChunk {
		t.Fatalf("interrupted run: %+v %v", p, err)
	}
	p, err = svc.Reschedule(context.Background(), nil)
	if err != nil || !p.Done || p.Moved != rows-RescheduleChunk || p.Scanned != rows {
		t.Fatalf("the next run: %+v %v", p, err)
	}
	for i := range rows {
		if r := rowOf(t, e.Store, fmt.Sprintf("desktop|https://a.test/c/%05d", i)); r.DueAtMs != now-60_000+threeMins || r.EffectiveIntervalMs != threeMins {
			t.Fatalf("row %d: due %d, carries %d", i, r.DueAtMs, r.EffectiveIntervalMs)
		}
	}
}
