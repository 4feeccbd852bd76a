//go:build shmstep

package fuzz

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/shm"
)

// The interleaving model runs the real shm.Ready.Take and shm.Ready.Publish, one atomic step at
// a time, in an order chosen by fuzz bytes. In the shmstep build shm calls a hook at every step
// of its protocol (shm/step.go); the hook parks the calling goroutine until the scheduler picks
// it again. Only one actor runs at any moment, so a schedule is fully determined by its bytes
// and replays exactly. After every step the checker verifies R1–R3:
//
//   - R1: no (generation, index) is returned by two takes.
//   - R2: every returned entry is byte-for-byte what the writer published at that (generation,
//     index).
//   - R3: a sealed slot's cursor carries its own generation's tag, its index never exceeds count
//     plus the number of readers, and it never moves backwards except by a clamp from above
//     count to exactly count.

const (
	modelCapacity = 3
	modelKeyCap   = 32
	modelGens     = 5
	modelTakes    = 6
)

type event struct {
	point shm.StepPoint
	done  bool
}

type actor struct {
	name   string
	gate   chan struct{}
	events chan event
	done   bool
}

type scheduler struct {
	actors []*actor
	cur    *actor
}

func (s *scheduler) spawn(name string, run func()) {
	a := &actor{name: name, gate: make(chan struct{}), events: make(chan event)}
	s.actors = append(s.actors, a)
	go func() {
		<-a.gate
		run()
		a.events <- event{done: true}
	}()
}

// hook runs in the actor's goroutine at each protocol step: report, then wait to be picked.
func (s *scheduler) hook(p shm.StepPoint) {
	a := s.cur
	a.events <- event{point: p}
	<-a.gate
}

// runOne lets a run until its next step point (or its end) and returns what it reached.
func (s *scheduler) runOne(a *actor) event {
	s.cur = a
	a.gate <- struct{}{}
	ev := <-a.events
	if ev.done {
		a.done = true
	}
	return ev
}

type take struct {
	reader int
	e      shm.Entry
}

type model struct {
	seg       *shm.Segment
	published map[uint64][]shm.Entry // generation → entries, recorded before Publish starts
	takes     []take
	readers   int
	lastIndex [2]struct{ tag, index uint64 }
	trace     []string
}

func modelEntry(g uint64, i int) shm.Entry {
	return shm.Entry{
		Score:     float64(g*100) + float64(i),
		DueAtMs:   int64(g),
		CadenceMs: int64(i + 1),
		Submitted: i%2 == 0,
		Lane:      uint8(i % 4),
		Key:       []byte(fmt.Sprintf("g%d/i%d/%s", g, i, "xxxxxxxxxxxx"[:(int(g)+i)%12])),
	}
}

// check verifies R1–R3 against everything that has happened so far.
func (m *model) check() error {
	seen := map[[2]uint64]int{}
	for _, tk := range m.takes {
		k := [2]uint64{tk.e.Gen, uint64(tk.e.Index)}
		if prev, dup := seen[k]; dup {
			return fmt.Errorf("R1: generation %d index %d returned to reader %d and reader %d", k[0], k[1], prev, tk.reader)
		}
		seen[k] = tk.reader
		pub := m.published[tk.e.Gen]
		if int(tk.e.Index) >= len(pub) {
			return fmt.Errorf("R2: reader %d got index %d of generation %d, which has %d entries", tk.reader, tk.e.Index, tk.e.Gen, len(pub))
		}
		want := pub[tk.e.Index]
		got := tk.e
		if got.Score != want.Score || got.DueAtMs != want.DueAtMs || got.CadenceMs != want.CadenceMs ||
			got.Submitted != want.Submitted || got.Lane != want.Lane || string(got.Key) != string(want.Key) ||
			got.KeyHash != shm.KeyHash(want.Key) {
			return fmt.Errorf("R2: reader %d got %q (score %v) as generation %d index %d, published %q (score %v)",
				tk.reader, got.Key, got.Score, got.Gen, got.Index, want.Key, want.Score)
		}
	}
	for s := range 2 {
		cursor, gen, count := m.seg.Ready().CursorWord(s)
		if gen == 0 || gen&(1<<63) != 0 {
			m.lastIndex[s] = struct{ tag, index uint64 }{}
			continue // never used, or being rewritten: its cursor means nothing yet
		}
		tag, index := cursor>>32, cursor&0xffffffff
		if tag != gen&0xffffffff {
			return fmt.Errorf("R3: slot %d holds generation %d but its cursor carries tag %d", s, gen, tag)
		}
		if index > count+uint64(m.readers) {
			return fmt.Errorf("R3: slot %d cursor index %d past count %d + %d readers", s, index, count, m.readers)
		}
		last := m.lastIndex[s]
		if last.tag == tag && index < last.index && !(last.index > count && index == count) {
			return fmt.Errorf("R3: slot %d generation %d cursor rewound from %d to %d (count %d)", s, gen, last.index, index, count)
		}
		m.lastIndex[s] = struct{ tag, index uint64 }{tag, index}
	}
	return nil
}

// runModel plays one schedule. data[0] picks the number of readers, data[1:1+modelGens] the
// sizes of the generations, and every further byte picks the next actor to step; when the bytes
// run out the actors finish round-robin. It returns the first invariant violation.
func runModel(t testing.TB, data []byte) (*model, error) {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	opts := shm.Options{ReadyCapacity: modelCapacity, KeyCapacity: modelKeyCap, LeaseCapacity: 1, Workers: 1, EpochMs: 1}
	size, err := shm.SizeFor(opts)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := shm.Format(shm.AlignedMemory(int(size)), opts)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{seg: seg, published: map[uint64][]shm.Entry{}, readers: int(next()%3) + 1}
	sizes := make([]int, modelGens)
	for i := range sizes {
		sizes[i] = int(next() % (modelCapacity + 1))
	}

	s := &scheduler{}
	s.spawn("writer", func() {
		for i, n := range sizes {
			g := uint64(i + 1)
			es := make([]shm.Entry, n)
			for j := range es {
				es[j] = modelEntry(g, j)
			}
			m.published[g] = es
			seg.Ready().Publish(es, int64(g))
		}
	})
	for r := range m.readers {
		s.spawn(fmt.Sprintf("reader%d", r), func() {
			var e shm.Entry
			for range modelTakes {
				if seg.Ready().Take(&e) == shm.Taken {
					kept := e
					kept.Key = append([]byte(nil), e.Key...)
					m.takes = append(m.takes, take{reader: r, e: kept})
				}
			}
		})
	}
	shm.SetStepHook(s.hook)
	defer shm.SetStepHook(nil)

	live := func() []*actor {
		var out []*actor
		for _, a := range s.actors {
			if !a.done {
				out = append(out, a)
			}
		}
		return out
	}
	rr := 0
	for {
		as := live()
		if len(as) == 0 {
			return m, nil
		}
		var a *actor
		if len(data) > 0 {
			a = as[int(next())%len(as)]
		} else {
			a = as[rr%len(as)]
			rr++
		}
		ev := s.runOne(a)
		if ev.done {
			m.trace = append(m.trace, a.name+" done")
		} else {
			m.trace = append(m.trace, a.name+" "+ev.point.String())
		}
		if err := m.check(); err != nil {
			// Let every actor finish so no goroutine stays parked, then report.
			shm.SetStepHook(nil)
			for _, a := range live() {
				for !s.runOne(a).done {
				}
			}
			tail := m.trace[max(0, len(m.trace)-12):]
			return m, fmt.Errorf("%w\nlast steps: %v", err, tail)
		}
	}
}

func FuzzShmInterleaving(f *testing.F) {
	f.Add([]byte{0, 3, 3, 3, 3, 3})
	f.Add([]byte{2, 3, 1, 0, 2, 3, 1, 1, 1, 0, 0, 0, 2, 2, 1})
	f.Add([]byte{1, 2, 3, 2, 3, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := runModel(t, data); err != nil {
			t.Fatal(err)
		}
	})
}

// The model must catch the clamp bug of the system freshq replaces: an exhausted take that
// clamps the cursor with a plain store, after the slot was republished under it, writes its
// stale generation's cursor over the fresh one, and the fresh generation is skipped. The search
// is deterministic: schedules come from a fixed PRNG.
func TestModelCatchesPlainStoreClamp(t *testing.T) {
	shm.SetPlainStoreClamp(true)
	defer shm.SetPlainStoreClamp(false)
	found, tried := searchViolation(t, 20000)
	if found == nil {
		t.Fatalf("no schedule out of %d exposed the plain-store clamp", tried)
	}
	t.Logf("caught after %d schedules: %v", tried, found)
}

// The same search over the real CAS clamp finds nothing.
func TestModelHoldsForRandomSchedules(t *testing.T) {
	if found, tried := searchViolation(t, 20000); found != nil {
		t.Fatalf("schedule %d violates an invariant: %v", tried, found)
	}
}

func searchViolation(t *testing.T, schedules int) (error, int) {
	state := uint64(0x9e3779b97f4a7c15)
	for n := 1; n <= schedules; n++ {
		data := make([]byte, 200)
		for i := range data {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			data[i] = byte(state)
		}
		data[1], data[2], data[3] = 3, 3, 3 // full generations, so takes reach exhaustion
		if _, err := runModel(t, data); err != nil {
			return err, n
		}
	}
	return nil, schedules
}

// A reader stalled across two publishes must discard what it copied and retry on the
// generation now active. Two stalls: after its copy, before validation (the copy is of
// generation 1 and must not be returned once the slot holds generation 3), and after its add,
// before the copy (the bytes it then copies are generation 3's, under generation 1's index).
func TestStalledReaderDiscardsRewrittenSlot(t *testing.T) {
	for _, tc := range []struct {
		name        string
		readerSteps int
	}{
		{"stalled after copy", 4},  // loaded-active, loaded-cursor, added, copied
		{"stalled before copy", 3}, // loaded-active, loaded-cursor, added
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One reader; the writer publishes three generations of 3 entries.
			data := []byte{0, 3, 3, 3, 0, 0}
			steps := func(who byte, n int) {
				for range n {
					data = append(data, who) // 0 = writer, 1 = reader
				}
			}
			// A whole publish is 8 steps: marked, 3 entries, counted, cursor-reset, sealed, flipped.
			steps(0, 8)              // generation 1 is active, in slot 1
			steps(1, tc.readerSteps) // the reader holds index 0 of generation 1
			steps(0, 16)             // generations 2 and 3; 3 rewrites slot 1
			steps(1, 64)             // the reader validates, retries, and finishes its takes
			m, err := runModel(t, data)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.takes) == 0 {
				t.Fatalf("the reader took nothing; steps: %v", m.trace)
			}
			if first := m.takes[0].e; first.Gen != 3 || first.Index != 0 {
				t.Fatalf("first take after the stall returned generation %d index %d, want generation 3 index 0", first.Gen, first.Index)
			}
		})
	}
}
