package storetest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/internal/invariants"
	"github.com/freshq/freshq/store"
)

// checkF1 is the F1 checker. After a pass has advanced (or tried to advance) the floor, it
// reads the schedule rows and THEN the floors and the head. A row R with R.dueAt below the
// floor that bounds it, or below the head, is stranded unless the pass observed it, where
//
//	observed = the pass's IterateDue handed (R's cacheKey, R's dueAt) to its callback.
//
// Reading the rows before the floors makes the check exact: R's write lowered its floor to
// ≤ R.dueAt before it committed, and only the pass under test advances, before the check; so
// a floor above R.dueAt was raised over a row that existed or was in flight. (For the same
// reason the rows need not come from one snapshot: no advance runs while they are read.) A
// row written after its read is judged by the next check. The head is held to the same rule:
// a scan starting there must miss nothing either.
//
// keys names the rows to judge (nil: every row, by a scan). Point reads of a known key set
// keep the check cheap on Badger while thousands of versions of the same keys pile up in its
// memtable, which a scan would step over on every pass.
func checkF1(t testing.TB, st store.Store, observed map[string]int64, keys []string) []string {
	t.Helper()
	rows := map[string]int64{}
	if keys == nil {
		if err := st.ForEachSchedule(nil, func(k []byte, r store.Row) error {
			rows[string(k)] = r.DueAtMs
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		r, err := st.GetSchedule([]byte(k))
		switch {
		case err == nil:
			rows[k] = r.DueAtMs
		case !isErr(err, store.ErrNotFound):
			t.Fatal(err)
		}
	}
	floorOf := backdoor(t, st).Floors(t)
	head := st.HeadMs()
	var bad []string
	for k, due := range rows {
		floor := floorOf([]byte(k))
		if due >= floor && due >= head {
			continue
		}
		if d, ok := observed[k]; ok && d == due {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s due %d below its floor %d or the head %d, not observed", k, due, floor, head))
	}
	return bad
}

// Interleaving drives concurrent funnel writers against repeated scan-and-advance passes on a
// virtual clock, and runs the F1 checker after every pass.
type Interleaving struct {
	Passes  int
	Writers int
	Keys    int   // per writer
	Guard   int64 // ms
	// Mutations are passed to the store (store.TestSignals.Mutations): in a test build,
	// NaiveAdvance opens it with the protocol F1 forbids.
	Mutations store.Mutations
	// Advance, if set, ends a pass instead of p.AdvanceFloor: a backend's own test of a
	// protocol variant that has no test signal.
	Advance func(p store.Pass, guardMs int64)
	// StopAtFirst ends the run at the first violation.
	StopAtFirst bool
}

// Run runs c on a fresh store of open, its randomness drawn from seed, and returns the
// violations the checker found and how many passes moved the floor.
func (c Interleaving) Run(t *testing.T, open Opener, seed uint64) (violations []string, advances int) {
	f := store.NewMemFloor(5 * c.Guard)
	st := open(t, Options{Floor: f, TestSignals: store.TestSignals{Mutations: c.Mutations, BeforeCommit: func() {
		// Stretch the window between lowering the floor and committing, sometimes.
		if rand.IntN(3) == 0 {
			runtime.Gosched()
		}
	}}})
	var keys []string
	for w := range c.Writers {
		for k := range c.Keys {
			keys = append(keys, fmt.Sprintf("w%d|k%d", w, k))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var now atomic.Int64
	now.Store(10 * c.Guard)

	// Writers run concurrently with the passes but are paced by tokens the pass loop hands
	// out (a few writes per pass), so neither side starves the other.
	stop := make(chan struct{})
	tokens := make(chan struct{}, c.Writers)
	var wg sync.WaitGroup
	var writes atomic.Int64
	var writeErr atomic.Pointer[error]
	for w := range c.Writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for {
				select {
				case <-stop:
					return
				case <-tokens:
				}
				ws := c.writes(r, w, now.Load(), f.Load())
				if err := st.WriteSchedules(ws); err != nil {
					writeErr.CompareAndSwap(nil, &err)
					return
				}
				writes.Add(int64(len(ws)))
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
		if err := writeErr.Load(); err != nil {
			t.Fatalf("a writer failed: %v", *err)
		}
		t.Logf("seed %d: %d passes, %d advances, %d writes, floor %d, %d violations",
			seed, c.Passes, advances, writes.Load(), f.Load(), len(violations))
	}()

	for range c.Passes {
		for len(tokens) < cap(tokens) {
			tokens <- struct{}{}
		}
		now.Add(rng.Int64N(c.Guard / 2))
		observed, moved := c.pass(t, st, rng, now.Load())
		if moved {
			advances++
		}
		violations = append(violations, checkF1(t, st, observed, keys)...)
		if c.StopAtFirst && len(violations) > 0 {
			break
		}
	}
	mustVerify(t, st)
	return violations, advances
}

// writes is one call of writer w: one to three writes of its keys, one in 48 filed below the
// current floor, some in the future, most due around the guard.
func (c Interleaving) writes(r *rand.Rand, w int, now, floor int64) []store.Write {
	ws := make([]store.Write, 1+r.IntN(3))
	for i := range ws {
		k := fmt.Sprintf("w%d|k%d", w, r.IntN(c.Keys))
		var due int64
		switch r.IntN(48) {
		case 0: // filed below the current floor: older than the guard
			due = floor - 1 - r.Int64N(c.Guard/4)
		case 1: // in the future
			due = now + r.Int64N(2*c.Guard)
		default: // due now-ish, around the guard
			due = now - r.Int64N(4*c.Guard)
		}
		s, err := store.NewSchedule([]byte(k), max(0, due), r.IntN(2) == 0, r.Int64N(3)*c.Guard, store.Lanes{})
		if err != nil {
			panic(err) // due ≥ 0 and a short key: cannot happen
		}
		ws[i] = store.Write{Schedule: s}
	}
	return ws
}

// pass is one scan-and-advance pass at now, sometimes capped, in random chunks.
func (c Interleaving) pass(t *testing.T, st store.Store, rng *rand.Rand, now int64) (observed map[string]int64, moved bool) {
	p, err := st.BeginPass(now)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	observed = map[string]int64{}
	if cp, ok := p.(store.ClassPass); ok && rng.IntN(2) == 0 {
		if _, ok := cp.ClassFingerprint(); ok {
			return c.classPass(t, cp, rng, observed)
		}
	}
	maxRows := 0
	if rng.IntN(4) == 0 {
		maxRows = 1 + rng.IntN(8)
	}
	err = p.IterateDue(maxRows, 1+rng.IntN(8), func(rows []store.DueRow) error {
		for _, r := range rows {
			observed[string(r.Key)] = r.DueAtMs
		}
		if rng.IntN(4) == 0 {
			runtime.Gosched()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Advance != nil {
		c.Advance(p, c.Guard)
		return observed, true
	}
	_, moved = p.AdvanceFloor(c.Guard)
	return observed, moved
}

// classPass is a sweep's pass over the class index: the head, then the classes, then the
// advance. Only the head bounds the advance, so only the head counts as observed: the class
// reads run between it and the advance, as a sweep's do, but excuse no row.
func (c Interleaving) classPass(t *testing.T, cp store.ClassPass, rng *rand.Rand, observed map[string]int64) (map[string]int64, bool) {
	first, ok, err := cp.ReadHead()
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		observed[string(first.Key)] = first.DueAtMs
	}
	if rng.IntN(2) == 0 {
		readClasses(t, cp, rng)
	}
	if c.Advance != nil {
		c.Advance(cp, c.Guard)
		return observed, true
	}
	_, moved := cp.AdvanceFloor(c.Guard)
	return observed, moved
}

// The real protocol never strands a row, over thousands of random interleavings of funnel
// writes (one in 48 filed below the current floor) with scan-and-advance passes. The passes
// run as episodes of 1000 on fresh stores: under -race a long episode costs more per pass than
// a new store.
func testFloorInterleaving(t *testing.T, open Opener) {
	episodes := 8
	if invariants.Race || testing.Short() {
		episodes = 4
	}
	const passes = 1000
	total, advanced := 0, 0
	for seed := range uint64(episodes) {
		c := Interleaving{Passes: passes, Writers: 3, Keys: 8, Guard: 1000}
		bad, adv := c.Run(t, open, seed+1)
		if len(bad) > 0 {
			t.Fatalf("seed %d: %d rows stranded below the floor, first: %s", seed+1, len(bad), bad[0])
		}
		total += passes
		advanced += adv
	}
	if advanced < total/100 {
		t.Fatalf("only %d of %d passes advanced the floor: the test exercised nothing", advanced, total)
	}
	t.Logf("%d passes, %d advances, no row stranded", total, advanced)
}
