package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
)

const (
	hour  = qtest.Hour
	start = int64(1_800_000_000_000)
)

const routes = `
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 24h}
  - {name: product, match: prefix, path: /p/, interval: 48h}
`

func newSweeper(e *qtest.Env, log *bytes.Buffer) *Sweeper {
	opts := Options{Store: FromStore(e.Store, nil), Changes: NewChanges(), Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil)}
	if log != nil {
		opts.Log = qtest.Log(log)
	}
	return qtest.Must(New(opts))(e.T)
}

func takeAll(t *testing.T, seg *shm.Segment) []shm.Entry {
	t.Helper()
	var out []shm.Entry
	for {
		var e shm.Entry
		if seg.Ready().Take(&e) != shm.Taken {
			return out
		}
		out = append(out, e)
	}
}

// The ladder gap, end to end: the published entry of a catalog row on a 6 h rung under a 24 h
// route, 6 h late, carries score 1.0 × boost and the 6 h cadence.
func TestSweepScoresAgainstTheCarriedRung(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	e.Put("desktop|https://a.test/c/shoes", start-6*hour, true, 6*hour, store.Lanes{})
	res, err := newSweeper(e, nil).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 1 || res.Carried != 1 || res.Resolved != 0 {
		t.Fatalf("result %+v", res)
	}
	got := takeAll(t, e.Seg)
	if got[0].Score != 2.0 || got[0].CadenceMs != 6*hour || policy.Lane(got[0].Lane) != policy.LaneSubmitted {
		t.Fatalf("entry score %v cadence %d lane %d; want 2.0 (1.0 × boost 2), 6h, submitted", got[0].Score, got[0].CadenceMs, got[0].Lane)
	}
	if c := e.Worker0.Load(shm.CounterCadenceCarried); c != 1 {
		t.Fatalf("carried counter %d", c)
	}
}

// The upgrade path: rows without a carried cadence are scored with the resolved one and counted
// as resolved; when such a row holds the floor past unpin_after, the hatch files it forward
// with the cadence it resolved, so the row becomes self-describing.
func TestUpgradePathAndUnpinHatch(t *testing.T) {
	e := newEnv(t, routes+`
queue:
  claim_floor: {guard: 5m, unpin_after: 1h}
`, start, shm.Options{})
	wedged := "desktop|https://a.test/p/wedged"
	e.Put(wedged, start-10*hour, false, 0, store.Lanes{}) // no carried cadence: resolves to the route's 48 h
	e.Put("desktop|https://a.test/", start-2*hour, true, 0, store.Lanes{})
	var log bytes.Buffer
	s := newSweeper(e, &log)
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Resolved != 2 || res.Carried != 0 {
		t.Fatalf("first sweep: %+v", res)
	}
	if e.Worker0.Load(shm.CounterCadenceResolved) != 2 {
		t.Fatal("resolved counter not incremented")
	}
	if string(res.PinnedKey) != wedged || res.PinnedForMs != 0 {
		t.Fatalf("pin %q for %d", res.PinnedKey, res.PinnedForMs)
	}
	if h, since := e.Seg.Floor().Pin(); h != shm.KeyHash([]byte(wedged)) || since != start {
		t.Fatalf("shm pin (%d, %d)", h, since)
	}
	// Nobody claims anything; the row stays at the head.
	e.Advance(30 * 60_000)
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "half of unpin_after"); n != 1 {
		t.Fatalf("%d wedge warnings after 30 min, want 1:\n%s", n, log.String())
	}
	e.Advance(20 * 60_000)
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "half of unpin_after"); n != 1 {
		t.Fatalf("the wedge warning repeated: %d", n)
	}
	row, err := e.Store.GetSchedule([]byte(wedged))
	if err != nil || row.DueAtMs != start-10*hour {
		t.Fatalf("filed forward before unpin_after: %+v %v", row, err)
	}
	e.Advance(10 * 60_000)
	res, err = s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Unpinned {
		t.Fatalf("not unpinned after 1h: %+v", res)
	}
	row, err = e.Store.GetSchedule([]byte(wedged))
	if err != nil {
		t.Fatal(err)
	}
	if row.DueAtMs != e.Now() || row.EffectiveIntervalMs != 48*hour || row.Submitted {
		t.Fatalf("unpinned row %+v; want due now with the resolved 48h cadence", row)
	}
	e.CheckF1("after unpin")
	// The next sweep sees the homepage at the head and counts the upgraded row as carried.
	res, err = s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Carried != 1 || res.Resolved != 1 || string(res.PinnedKey) != "desktop|https://a.test/" {
		t.Fatalf("after upgrade: %+v", res)
	}
}

func TestFloorAdvancesAndRecordsNextDue(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	e.Put("desktop|https://a.test/c/1", start-3*hour, true, 0, store.Lanes{})
	e.Put("desktop|https://a.test/c/2", start+30_000, true, 0, store.Lanes{})
	res, err := newSweeper(e, nil).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	guard := int64(5 * 60_000)
	if !res.Advanced || res.FloorMs != start-3*hour-guard || e.Seg.Floor().Load() != res.FloorMs {
		t.Fatalf("floor %d advanced %v; want %d", res.FloorMs, res.Advanced, start-3*hour-guard)
	}
	if res.NextDueMs != start+30_000 || e.Seg.Floor().NextDue() != start+30_000 {
		t.Fatalf("next due %d / %d", res.NextDueMs, e.Seg.Floor().NextDue())
	}
	e.CheckF1("after sweep")
}

func TestDisabledTakesEffectOnNextTick(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	for i := range 5 {
		e.Put("desktop|https://a.test/c/"+string(rune('a'+i)), start-hour, true, 0, store.Lanes{})
	}
	s := newSweeper(e, nil)
	if res, _ := s.Sweep(context.Background()); res.Published != 5 {
		t.Fatalf("enabled sweep published %d", res.Published)
	}
	e.Reload(routes + "queue:\n  ready: {enabled: false}\n")
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Disabled || res.Gen != 0 || res.Rows != 1 {
		t.Fatalf("disabled sweep %+v; want no publish and a one-row floor pass", res)
	}
	var en shm.Entry
	if st := e.Seg.Ready().Take(&en); st != shm.Disabled {
		t.Fatalf("take after the disabled sweep: %v", st)
	}
	e.Reload(routes)
	if res, _ := s.Sweep(context.Background()); res.Published != 5 || !e.Seg.Ready().Enabled() {
		t.Fatalf("re-enabled sweep %+v", res)
	}
}

// failingStore fails or panics in BeginPass when told to.
type failingStore struct {
	Store
	fail, panic bool
}

func (f *failingStore) BeginPass(now int64) (Pass, error) {
	if f.panic {
		f.panic = false
		panic("injected")
	}
	if f.fail {
		f.fail = false
		return nil, errors.New("injected failure")
	}
	return f.Store.BeginPass(now)
}

// A sweep that fails or panics is logged and counted, and the next one runs normally: no latch.
func TestFailedSweepIsRetriedNextTick(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	e.Put("desktop|https://a.test/c/1", start-hour, true, 0, store.Lanes{})
	fs := &failingStore{Store: FromStore(e.Store, nil), fail: true}
	var log bytes.Buffer
	s := qtest.Must(New(Options{Store: fs, Changes: NewChanges(), Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(&log)}))(t)
	if _, err := s.Sweep(context.Background()); err == nil {
		t.Fatal("injected failure not reported")
	}
	fs.panic = true
	_, err := s.Sweep(context.Background())
	if err == nil || !strings.Contains(err.Error(), "panic: injected") {
		t.Fatalf("panic not recovered into an error: %v", err)
	}
	res, err := s.Sweep(context.Background())
	if err != nil || res.Published != 1 {
		t.Fatalf("sweep after failures: %+v %v", res, err)
	}
	if f := e.Worker0.Load(shm.CounterSweepFailures); f != 2 {
		t.Fatalf("failure counter %d, want 2", f)
	}
	if n := strings.Count(log.String(), "sweep failed"); n != 2 {
		t.Fatalf("%d failure log lines, want 2", n)
	}
}

func TestSweepCapWarns(t *testing.T) {
	e := newEnv(t, routes+"queue:\n  ready: {capacity: 2, sweep_cap: 3}\n", start, shm.Options{})
	for i := range 6 {
		e.Put("desktop|https://a.test/c/"+string(rune('a'+i)), start-int64(6-i)*hour, true, 0, store.Lanes{})
	}
	var log bytes.Buffer
	s := newSweeper(e, &log)
	s.fullPass = true // the class merge reads 2 rows here: its cap is TestClassMergeCapWarns
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Capped || res.Rows != 3 || res.Published != 2 {
		t.Fatalf("capped sweep %+v", res)
	}
	if !strings.Contains(log.String(), "recently-due rows went unranked") {
		t.Fatalf("no cap warning:\n%s", log.String())
	}
	if e.Worker0.Load(shm.CounterSweepCapped) != 1 {
		t.Fatal("capped counter not incremented")
	}
}

func TestLongKeysSkipTheReadySet(t *testing.T) {
	e := newEnv(t, routes+"queue:\n  ready: {key_capacity: 32}\n", start, shm.Options{})
	long := "desktop|https://a.test/c/" + strings.Repeat("x", 40)
	e.Put(long, start-5*hour, true, 0, store.Lanes{})
	e.Put("desktop|https://a.test/c/1", start-hour, true, 0, store.Lanes{})
	res, err := newSweeper(e, nil).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.LongKeys != 1 || res.Published != 1 {
		t.Fatalf("result %+v", res)
	}
	if got := takeAll(t, e.Seg); len(got) != 1 || string(got[0].Key) != "desktop|https://a.test/c/1" {
		t.Fatalf("published %v", got)
	}
}

func TestRunSweepsOnEachTickUntilCancelled(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	e.Put("desktop|https://a.test/c/1", start-hour, true, 0, store.Lanes{})
	swept := make(chan error)
	s := qtest.Must(New(Options{Store: FromStore(e.Store, nil), Changes: NewChanges(), Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now,
		Log: qtest.Log(nil), AfterSweep: func(_ Result, err error) { swept <- err }}))(t)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		s.Run(ctx, ticks)
		close(done)
	}()
	for i := range 3 {
		ticks <- time.Time{}
		if err := <-swept; err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
	}
	cancel()
	<-done
	if n := e.Worker0.Load(shm.CounterSweeps); n != 3 {
		t.Fatalf("%d sweeps for 3 ticks", n)
	}
}

// On Badger every row a sweep publishes is left with the store as a hint, and a result applied
// over it is shown exactly the row the store holds: the pass's copy (read from the class
// index) is the row, flags and intervals included (RH1 from sweep to funnel).
func TestPublishedRowsAreHintedAsStored(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	keys := []string{"desktop|https://a.test/c/one", "desktop|https://a.test/c/two", "desktop|https://a.test/p/three"}
	for i, k := range keys {
		e.Put(k, start-int64(i+1)*hour, i%2 == 0, int64(i)*hour, store.Lanes{Failing: i == 2})
	}
	hints, ok := e.Store.(interface {
		RowHints
		HintsUsed() uint64
	})
	if !ok {
		t.Fatalf("the test store %T takes no row hints", e.Store)
	}
	changes := NewChanges()
	s := qtest.Must(New(Options{Store: FromStore(e.Store, changes), Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil), Changes: changes, Hints: hints}))(t)
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	published := takeAll(t, e.Seg)
	if len(published) != len(keys) {
		t.Fatalf("published %d rows, want %d", len(published), len(keys))
	}
	for _, p := range published {
		want, err := e.Store.GetSchedule(p.Key)
		if err != nil {
			t.Fatal(err)
		}
		var seen store.Current
		if _, err := e.Store.Modify([]store.Change{{Key: p.Key, MinDueMs: start, Decide: func(cur store.Current) (store.Write, bool, error) {
			seen = cur
			return store.Write{}, false, nil
		}}}); err != nil {
			t.Fatal(err)
		}
		if !seen.HasRow || seen.Row != want {
			t.Fatalf("%s: a result was shown %+v, the store holds %+v", p.Key, seen.Row, want)
		}
	}
	if n := hints.HintsUsed(); n != uint64(len(keys)) {
		t.Fatalf("%d results used a hint, want %d", n, len(keys))
	}
}

// rowHints records the hints a sweep leaves.
type rowHints map[string]store.Row

func (h rowHints) HintRow(key []byte, row store.Row) { h[string(key)] = row }
func (h rowHints) DropHint(key []byte)               { delete(h, string(key)) }

// writeDuringPass rewrites one row through the tracked writer while the pass is open: the
// moment a result commits in the middle of a sweep.
type writeDuringPass struct {
	Store
	write func()
}

func (w writeDuringPass) BeginPass(now int64) (Pass, error) {
	p, err := w.Store.BeginPass(now)
	if err != nil {
		return nil, err
	}
	return hookedPass{Pass: p, hook: w.write}, nil
}

type hookedPass struct {
	Pass
	hook func()
}

func (h hookedPass) IterateDue(maxRows, chunk int, fn func([]store.DueRow) error) error {
	h.hook()
	return h.Pass.IterateDue(maxRows, chunk, fn)
}

// A row written after the pass's snapshot was scored from its old version; publishing it would
// hand out a row whose render was just committed. It is left out of the set.
func TestSweepLeavesOutRowsWrittenAfterItsSnapshot(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	rendered := "desktop|https://a.test/c/rendered"
	e.Put(rendered, start-5*hour, true, 0, store.Lanes{})
	e.Put("desktop|https://a.test/c/other", start-hour, true, 0, store.Lanes{})
	changes := NewChanges()
	writer := changes.Wrap(e.Store)
	st := writeDuringPass{Store: FromStore(e.Store, changes), write: func() {
		sch, _ := store.NewSchedule([]byte(rendered), start+24*hour, true, 24*hour, store.Lanes{})
		if err := writer.WriteSchedule(sch); err != nil {
			t.Error(err)
		}
	}}
	hints := rowHints{}
	s := qtest.Must(New(Options{Store: st, Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil), Changes: changes, Hints: hints}))(t)
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExcludedChanged != 1 || res.Published != 1 {
		t.Fatalf("result %+v; want the rewritten row left out", res)
	}
	// The published row is hinted as the pass read it; the rewritten one is not hinted at all,
	// as the pass's version of it is stale (RowHints).
	if row, ok := hints[rendered]; ok {
		t.Fatalf("the row written after the snapshot is hinted: %+v", row)
	}
	if row, ok := hints["desktop|https://a.test/c/other"]; !ok || row.DueAtMs != start-hour {
		t.Fatalf("the published row's hint: %+v %v, want its row due %d", row, ok, start-hour)
	}
	if got := takeAll(t, e.Seg); len(got) != 1 || string(got[0].Key) != "desktop|https://a.test/c/other" {
		t.Fatalf("published %d entries, first %q", len(got), got[0].Key)
	}
	// The next sweep starts clean: nothing is left out any more.
	e.Put(rendered, start-time.Hour.Milliseconds(), true, 0, store.Lanes{})
	if res, _ := qtest.Must(New(Options{Store: FromStore(e.Store, changes), Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now,
		Log: qtest.Log(nil), Changes: changes}))(t).Sweep(context.Background()); res.ExcludedChanged != 0 || res.Published != 2 {
		t.Fatalf("next sweep %+v", res)
	}
}

func TestChangesCountsWritesInFlightAtTheSnapshot(t *testing.T) {
	c := NewChanges()
	before := c.begin([][]byte{[]byte("a")}) // in flight when the sweep begins
	c.end(c.begin([][]byte{[]byte("done")})) // finished before: in the snapshot
	c.sweepBegin()
	c.end(before)
	c.end(c.begin([][]byte{[]byte("during")}))
	for k, want := range map[string]bool{"a": true, "during": true, "done": false, "never": false} {
		if got := c.changedSince(shm.KeyHash([]byte(k))); got != want {
			t.Errorf("%q changed = %v, want %v", k, got, want)
		}
	}
	c.sweepEnd()
	if c.changedSince(shm.KeyHash([]byte("a"))) || len(c.inflight) != 0 {
		t.Fatal("state left over after the sweep")
	}
}

// The unpin hatch files the row it read in the pass's snapshot. A result committed after that
// snapshot (the wedged row was rendering after all) is newer than the hatch's picture of the
// row, and must not be overwritten by it: the hatch files only a row that is still as it saw it.
func TestUnpinHatchLeavesARowWrittenAfterItsSnapshot(t *testing.T) {
	e := newEnv(t, routes+`
queue:
  claim_floor: {guard: 5m, unpin_after: 1h}
`, start, shm.Options{})
	wedged := "desktop|https://a.test/p/wedged"
	e.Put(wedged, start-10*hour, false, 0, store.Lanes{Failing: true})
	s := newSweeper(e, nil)
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Advance(hour)
	// The result of the row's render commits while the next sweep's pass is open.
	rendered, err := store.NewSchedule([]byte(wedged), e.Now()+48*hour, false, 48*hour, store.Lanes{})
	if err != nil {
		t.Fatal(err)
	}
	st := writeDuringPass{Store: FromStore(e.Store, nil), write: func() {
		if err := e.Store.WriteSchedule(rendered); err != nil {
			t.Error(err)
		}
	}}
	s.opts.Store = st
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	row, err := e.Store.GetSchedule([]byte(wedged))
	if err != nil {
		t.Fatal(err)
	}
	if row.DueAtMs != e.Now()+48*hour || row.Failing || res.Unpinned {
		t.Fatalf("after the hatch: %+v (unpinned %v); the committed result must stand", row, res.Unpinned)
	}
	e.CheckF1("after a refused unpin")

	// Nothing wrote it this time: the hatch files it.
	e.Put(wedged, start-10*hour, false, 0, store.Lanes{Failing: true})
	s.opts.Store = FromStore(e.Store, nil)
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Advance(hour)
	if res, err = s.Sweep(context.Background()); err != nil || !res.Unpinned {
		t.Fatalf("the hatch did not file an unchanged row: %+v %v", res, err)
	}
}

// New refuses each required option left out, naming it: without Changes a sweep could publish
// a row written after its snapshot.
func TestNewRefusesAMissingDependency(t *testing.T) {
	e := qtest.New(t, "", 1_000_000, shm.Options{})
	full := Options{Store: FromStore(e.Store, nil), Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf),
		Now: e.Now, Changes: NewChanges()}
	if _, err := New(full); err != nil {
		t.Fatalf("every option given: %v", err)
	}
	for name, drop := range map[string]func(*Options){
		"Store": func(o *Options) { o.Store = nil }, "Segment": func(o *Options) { o.Segment = nil },
		"Policy": func(o *Options) { o.Policy = nil }, "Settings": func(o *Options) { o.Settings = nil },
		"Now": func(o *Options) { o.Now = nil }, "Changes": func(o *Options) { o.Changes = nil },
	} {
		o := full
		drop(&o)
		s, err := New(o)
		if s != nil || !errors.Is(err, ErrMissingDependency) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v, %v; want ErrMissingDependency naming it", name, s, err)
		}
	}
}

// A Sweeper keeps its selector from sweep to sweep, and a reload that changes the set's size
// between sweeps takes effect at the next one: each sweep publishes what a new Sweeper
// publishes at the same instant.
func TestSweepAfterCapacityChangesPublishesAsAFreshSweeper(t *testing.T) {
	e := newEnv(t, routes, start, shm.Options{})
	for i := range 80 {
		e.Put(fmt.Sprintf("desktop|https://a%d.test/c/%d", i%9, i), start-int64(i)*hour/7, i%5 == 0, 0, store.Lanes{NeverRendered: i%11 == 0})
	}
	capacity := 50
	settings := func() *Settings {
		s := qtest.Settings(e, SweepSettingsOf)()
		s.Capacity = capacity
		return s
	}
	sweeper := func() *Sweeper {
		return qtest.Must(New(Options{Store: FromStore(e.Store, nil), Changes: NewChanges(), Segment: e.Seg, Worker: e.Worker0,
			Policy: e.Policy, Settings: settings, Now: e.Now, Log: qtest.Log(nil)}))(t)
	}
	kept := sweeper()
	for _, c := range []int{50, 10, 10, 50, 3} {
		capacity = c
		if _, err := kept.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := takeAll(t, e.Seg)
		if _, err := sweeper().Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := takeAll(t, e.Seg)
		if len(got) != c || !slices.Equal(keysOf(got), keysOf(want)) {
			t.Fatalf("capacity %d: the kept sweeper published %d entries %v, a new one %v", c, len(got), keysOf(got), keysOf(want))
		}
	}
}
