package capacity

import (
	"fmt"
	"github.com/freshq/freshq/assemble"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
)

func testPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	cfg, err := config.Parse([]byte(`
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 24h}
  - {name: product, match: prefix, path: /p/, interval: 48h}
`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := assemble.Policy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func openStore(t testing.TB) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

const hourMs = 3600 * 1000

var intervals = []int64{0, 6 * hourMs, 12 * hourMs, 24 * hourMs, 48 * hourMs, 7 * 24 * hourMs, 30 * 1000 /* unusable */}

func randomKey(r *rand.Rand) []byte {
	paths := []string{"/", "/c/%d", "/p/%d", "/blog/%d"}
	p := paths[r.IntN(len(paths))]
	if p != "/" {
		p = fmt.Sprintf(p, r.IntN(40))
	}
	dev := []string{"desktop", "mobile"}[r.IntN(2)]
	return []byte(dev + "|https://example.test" + p)
}

func randomSchedule(t *testing.T, r *rand.Rand, key []byte, nowMs int64) store.Schedule {
	t.Helper()
	sch, err := store.NewSchedule(key, nowMs+r.Int64N(48*hourMs), r.IntN(2) == 0, intervals[r.IntN(len(intervals))],
		store.Lanes{Urgent: r.IntN(8) == 0, NeverRendered: r.IntN(5) == 0, Failing: r.IntN(6) == 0})
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func randomTarget(r *rand.Rand, key []byte) *store.Target {
	t := &store.Target{URL: string(key), Device: "desktop", Source: store.SourceAPI, StoredIntervalMs: intervals[r.IntN(len(intervals))]}
	if r.IntN(6) == 0 {
		t.Terminal = []store.Terminal{store.TerminalGone, store.TerminalSuppressed, store.TerminalBeyondHorizon}[r.IntN(3)]
	}
	if r.IntN(3) == 0 {
		t.LastRender.AtMs = r.Int64N(1000)
	}
	return t
}

// TestLedgerMatchesRecount drives random writes of every kind a worker 0 makes (upserts with
// and without a target, rung moves and lane changes through Modify, terminal seals, unseals,
// deletes, unpin refiles) through WrapStore, and checks after every step batch that the
// incremental demand equals an exact recount of the store by a fresh ledger.
func TestLedgerMatchesRecount(t *testing.T) {
	pol := testPolicy(t)
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 19))
			raw := openStore(t)
			l := NewLedger(func() *policy.Policy { return pol })
			st := WrapStore(raw, l, &Meter{})
			now := int64(1_700_000_000_000)
			for round := range 30 {
				for range 40 {
					step(t, r, st, now)
				}
				checkAgainstRecount(t, pol, raw, l, round)
			}
		})
	}
}

func step(t *testing.T, r *rand.Rand, st store.Store, now int64) {
	t.Helper()
	key := randomKey(r)
	var err error
	switch op := r.IntN(10); op {
	case 0, 1: // an upsert carrying its target
		err = st.WriteSchedules([]store.Write{{Schedule: randomSchedule(t, r, key, now), Target: randomTarget(r, key)}})
	case 2: // a schedule put alone
		err = st.WriteSchedule(randomSchedule(t, r, key, now))
	case 3, 4: // a batch mixing keys, some twice
		ws := make([]store.Write, 1+r.IntN(5))
		for i := range ws {
			k := key
			if r.IntN(2) == 0 {
				k = randomKey(r)
			}
			ws[i] = store.Write{Schedule: randomSchedule(t, r, k, now)}
			if r.IntN(2) == 0 {
				ws[i].Target = randomTarget(r, k)
			}
		}
		err = st.WriteSchedules(ws)
	case 5, 6: // a result: rung move, lane change, seal or unseal, decided on what is stored
		_, err = st.Modify([]store.Change{{Key: key, MinDueMs: now, Decide: func(cur store.Current) (store.Write, bool, error) {
			if !cur.HasRow && r.IntN(2) == 0 {
				return store.Write{}, false, nil
			}
			sch := randomSchedule(t, r, key, now)
			tgt := cur.Target
			if !cur.HasTarget {
				tgt = store.Target{URL: string(key), Device: "desktop", Source: store.SourceAPI}
			}
			tgt.Terminal = store.TerminalNone
			if r.IntN(4) == 0 {
				tgt.Terminal = store.TerminalGone
			}
			tgt.LastRender.AtMs = now
			return store.Write{Schedule: sch, Target: &tgt}, true, nil
		}}})
	case 7, 8:
		err = st.DeleteTarget(key)
	case 9: // the unpin hatch
		was, gerr := st.GetSchedule(key)
		if gerr != nil {
			return
		}
		sch, serr := store.NewSchedule(key, now, was.Submitted, was.EffectiveIntervalMs, was.Lanes)
		if serr != nil {
			t.Fatal(serr)
		}
		_, err = st.RefileIfUnchanged(sch, was)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func checkAgainstRecount(t *testing.T, pol *policy.Policy, raw store.Store, l *Ledger, round int) {
	t.Helper()
	fresh := NewLedger(func() *policy.Policy { return pol })
	if _, err := fresh.Recount(raw, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	got, want := l.Demand(), fresh.Demand()
	if !reflect.DeepEqual(got.Classes, want.Classes) {
		t.Fatalf("round %d: incremental demand\n%+v\nrecount\n%+v", round, got.Classes, want.Classes)
	}
	if got.Rows == 0 {
		t.Fatalf("round %d: no demand at all: the test exercises nothing", round)
	}
}

// TestRecountReplacesDrift: a write the ledger never saw (made on the raw store) is a drift;
// the recount reports it and replaces the incremental figure.
func TestRecountReplacesDrift(t *testing.T) {
	pol := testPolicy(t)
	raw := openStore(t)
	l := NewLedger(func() *policy.Policy { return pol })
	st := WrapStore(raw, l, nil)
	now := int64(1_700_000_000_000)
	key := []byte("desktop|https://example.test/c/1")
	sch, _ := store.NewSchedule(key, now, true, 0, store.Lanes{})
	if err := st.WriteSchedule(sch); err != nil {
		t.Fatal(err)
	}
	// Behind the ledger's back: a second row, and the first one sealed.
	other := []byte("desktop|https://example.test/")
	sch2, _ := store.NewSchedule(other, now, true, 0, store.Lanes{})
	if err := raw.WriteSchedules([]store.Write{{Schedule: sch2}, {Schedule: sch, Target: &store.Target{URL: "x", Source: store.SourceAPI, Terminal: store.TerminalGone}}}); err != nil {
		t.Fatal(err)
	}
	before := l.Demand()
	if want := 1000.0 / (24 * hourMs); before.Total != want {
		t.Fatalf("incremental before recount: %v, want one catalog row %v", before.Total, want)
	}
	d, err := l.Recount(raw, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if d.RowsDiffering != 2 || d.Rows != 1 {
		t.Fatalf("drift %+v: want 2 keys differing and 1 row with demand", d)
	}
	if want := 1000.0 / hourMs; l.Demand().Total != want || d.RecountTotal != want {
		t.Fatalf("after recount: %v (drift %+v), want the home row only %v", l.Demand().Total, d, want)
	}
}

var nopLog = zerolog.Nop()

// midRecount is a Source that runs a write the first time the recount reads a row: a write
// racing the recount, made deterministic.
type midRecount struct {
	Source
	write func()
	done  bool
}

func (m *midRecount) ForEachSchedule(prefix []byte, fn func([]byte, store.Row) error) error {
	return m.Source.ForEachSchedule(prefix, func(k []byte, r store.Row) error {
		if !m.done {
			m.done = true
			m.write()
		}
		return fn(k, r)
	})
}

// TestRecountKeepsWritesThatRaceIt: keys written while a recount reads keep what their write
// said, whether the recount's snapshot saw them or not, so the ledger equals an exact recount
// made afterwards.
func TestRecountKeepsWritesThatRaceIt(t *testing.T) {
	pol := testPolicy(t)
	raw := openStore(t)
	l := NewLedger(func() *policy.Policy { return pol })
	st := WrapStore(raw, l, nil)
	now := int64(1_700_000_000_000)
	put := func(key string, effMs int64) {
		sch, _ := store.NewSchedule([]byte(key), now, true, effMs, store.Lanes{})
		if err := st.WriteSchedule(sch); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		put(fmt.Sprintf("desktop|https://example.test/b/%02d", i), 24*hourMs)
	}
	src := &midRecount{Source: raw, write: func() {
		st.DeleteTarget([]byte("desktop|https://example.test/b/19")) // read later by the iteration, or not at all
		put("desktop|https://example.test/b/05", 6*hourMs)           // changed under the recount
		put("desktop|https://example.test/a/new", 12*hourMs)         // before the iteration's position
		put("desktop|https://example.test/z/new", 48*hourMs)         // after it
	}}
	if _, err := l.Recount(src, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	checkAgainstRecount(t, pol, raw, l, 0)
}
