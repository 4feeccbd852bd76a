package capacity

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// pointReads hides a store's joined read: a recount from it reads each row's target by a point
// read, as from any Source, and counts them.
type pointReads struct {
	Source
	targets int
}

func (p *pointReads) GetTarget(key []byte) (store.Target, error) {
	p.targets++
	return p.Source.GetTarget(key)
}

// noPointReads is the Badger store's joined read with point reads forbidden.
type noPointReads struct {
	JoinedSource
	t *testing.T
}

func (p noPointReads) GetTarget([]byte) (store.Target, error) {
	p.t.Fatal("a recount from a joined source read a target by itself")
	return store.Target{}, nil
}

// A recount from a store that reads rows with their targets in one walk (the Badger store)
// never reads a target by itself, and counts what a recount by point reads counts: targets'
// stored intervals and sealed states included, rows without a target too. So does the
// freshness tap on it, which hands the same rows and targets on.
func TestRecountReadsTargetsInOneWalk(t *testing.T) {
	pol := testPolicy(t)
	raw := openStore(t)
	for i := range 60 {
		key := []byte(fmt.Sprintf("desktop|https://example.test/p/%d", i))
		sch, err := store.NewSchedule(key, 1, i%2 == 0, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		w := store.Write{Schedule: sch}
		if i%4 != 0 { // a quarter of the rows have no target
			tg := store.Target{URL: "https://example.test/p", Device: "desktop", Source: store.SourceSitemap, StoredIntervalMs: int64(i+1) * 3_600_000}
			if i%5 == 0 {
				tg.Terminal = store.TerminalSuppressed // sealed: no demand
			}
			w.Target = &tg
		}
		if err := raw.WriteSchedules([]store.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
	var _ JoinedSource = raw

	recount := func(src Source) (Demand, map[string]int64) {
		tapped := map[string]int64{}
		src = tapPages(src, func(key []byte, _ store.Row, tg *store.Target) { tapped[string(key)] = tg.StoredIntervalMs })
		l := NewLedger(func() *policy.Policy { return pol })
		if _, err := l.Recount(src, nopLog); err != nil {
			t.Fatal(err)
		}
		return l.Demand(), tapped
	}
	byPoint := &pointReads{Source: raw}
	want, wantTapped := recount(byPoint)
	if byPoint.targets != 60 {
		t.Fatalf("the point-read recount read %d targets, want 60", byPoint.targets)
	}
	got, gotTapped := recount(noPointReads{JoinedSource: raw, t: t})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("joined recount %+v\npoint reads %+v", got, want)
	}
	if len(gotTapped) != 45 || !reflect.DeepEqual(gotTapped, wantTapped) {
		t.Fatalf("the tap saw %d rows with targets (want 45): %v\npoint reads: %v", len(gotTapped), gotTapped, wantTapped)
	}
	if want.Rows == 0 || want.Rows == 60 {
		t.Fatalf("%d rows with demand: the sealed targets must count none, the others some", want.Rows)
	}
}
