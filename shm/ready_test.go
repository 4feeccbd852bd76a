package shm

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTakeCold(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 4})
	var e Entry
	if st := seg.Ready().Take(&e); st != Cold {
		t.Fatalf("take before any publish: %v, want cold", st)
	}
}

func TestTakeHandsOutInPublishedOrderThenExhausts(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 10, KeyCapacity: 64})
	r := seg.Ready()
	res := r.Publish(checkedSet(1, 5, 64), 123)
	if res.Gen != 1 || res.Published != 5 || res.DroppedKeys != 0 || res.OverCapacity != 0 {
		t.Fatalf("publish result %+v", res)
	}
	var e Entry
	for i := range 5 {
		if st := r.Take(&e); st != Taken {
			t.Fatalf("take %d: %v", i, st)
		}
		if e.Gen != 1 || e.Index != uint32(i) {
			t.Fatalf("take %d returned (gen %d, index %d)", i, e.Gen, e.Index)
		}
		if err := verifyEntry(&e); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Take(&e); st != Exhausted {
		t.Fatalf("sixth take: %v, want exhausted", st)
	}
	st := r.Stats()
	if st.Gen != 1 || st.Count != 5 || st.Taken != 5 || st.PublishedAtMs != 123 || !st.Enabled || st.Publishes != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// An exhausted or empty set must not write the cursor line: idle workers would otherwise keep
// stealing it from each other. An add would move the index past count, so an unchanged word
// after many takes proves no add happened.
func TestExhaustedTakeDoesNotWriteCursor(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 4, KeyCapacity: 64})
	r := seg.Ready()
	for _, n := range []int{0, 3} {
		res := r.Publish(checkedSet(uint64(n+1), n, 64), 0)
		var e Entry
		for range n {
			if st := r.Take(&e); st != Taken {
				t.Fatalf("take: %v", st)
			}
		}
		s := &r.slots[res.Gen&1]
		before := atomic.LoadUint64(s.cursor)
		for range 1000 {
			if st := r.Take(&e); st != Exhausted {
				t.Fatalf("take on exhausted set: %v", st)
			}
		}
		if after := atomic.LoadUint64(s.cursor); after != before {
			t.Fatalf("set of %d: cursor word %#x became %#x on exhausted takes", n, before, after)
		}
		if cursorIndex(before) != uint64(n) {
			t.Fatalf("cursor index %d, want %d", cursorIndex(before), n)
		}
	}
}

func TestPublishDropsLongKeysNeverTruncates(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 10, KeyCapacity: 16})
	r := seg.Ready()
	keys := []string{"short", strings.Repeat("k", 16), strings.Repeat("l", 17), "tail"}
	es := make([]Entry, len(keys))
	for i, k := range keys {
		es[i] = Entry{Key: []byte(k), Score: float64(i)}
	}
	res := r.Publish(es, 0)
	if res.Published != 3 || res.DroppedKeys != 1 {
		t.Fatalf("publish result %+v, want 3 published and 1 dropped", res)
	}
	var got []string
	var e Entry
	for r.Take(&e) == Taken {
		got = append(got, string(e.Key))
	}
	want := []string{"short", strings.Repeat("k", 16), "tail"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("taken %q, want %q", got, want)
	}
	if st := r.Stats(); st.DroppedKeys != 1 {
		t.Fatalf("dropped counter %d, want 1", st.DroppedKeys)
	}
}

func TestPublishOverCapacityKeepsTheHead(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 3, KeyCapacity: 64})
	r := seg.Ready()
	res := r.Publish(checkedSet(1, 5, 64), 0)
	if res.Published != 3 || res.OverCapacity != 2 {
		t.Fatalf("publish result %+v", res)
	}
	var e Entry
	for i := range 3 {
		if r.Take(&e) != Taken || e.Index != uint32(i) {
			t.Fatalf("take %d: index %d", i, e.Index)
		}
	}
}

func TestNewGenerationReplacesOld(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 8, KeyCapacity: 64})
	r := seg.Ready()
	r.Publish(checkedSet(1, 4, 64), 0)
	var e Entry
	r.Take(&e)
	r.Publish(checkedSet(2, 2, 64), 0)
	for i := range 2 {
		if st := r.Take(&e); st != Taken || e.Gen != 2 || e.Index != uint32(i) {
			t.Fatalf("take %d after republish: %v gen %d index %d", i, st, e.Gen, e.Index)
		}
		if err := verifyEntry(&e); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Take(&e); st != Exhausted {
		t.Fatalf("got %v, want exhausted", st)
	}
	// Generation 3 reuses slot 1, whose previous cursor was left mid-way at index 1.
	r.Publish(checkedSet(3, 3, 64), 0)
	for i := range 3 {
		if st := r.Take(&e); st != Taken || e.Gen != 3 || e.Index != uint32(i) {
			t.Fatalf("gen 3 take %d: %v gen %d index %d", i, st, e.Gen, e.Index)
		}
	}
}

func TestDisableTakesEffectOnNextTake(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 8})
	r := seg.Ready()
	r.Publish(checkedSet(1, 4, 256), 0)
	r.SetEnabled(false)
	var e Entry
	if st := r.Take(&e); st != Disabled {
		t.Fatalf("take while disabled: %v", st)
	}
	if r.Stats().Taken != 0 {
		t.Fatal("a disabled take consumed an entry")
	}
	r.SetEnabled(true)
	if st := r.Take(&e); st != Taken || e.Index != 0 {
		t.Fatalf("take after re-enable: %v index %d", st, e.Index)
	}
}

func TestWriterResumesGenerationsAfterReattach(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 8, KeyCapacity: 64})
	seg.Ready().Publish(checkedSet(1, 1, 64), 0)
	seg.Ready().Publish(checkedSet(2, 1, 64), 0)
	// A restarted worker 0 attaches a new view and carries on from the active generation.
	again, err := FromBytes(seg.mem)
	if err != nil {
		t.Fatal(err)
	}
	if res := again.Ready().Publish(checkedSet(3, 2, 64), 0); res.Gen != 3 {
		t.Fatalf("restarted writer published generation %d, want 3", res.Gen)
	}
}

func TestTakeReusesKeyStorage(t *testing.T) {
	seg := newTestSegment(t, Options{ReadyCapacity: 8, KeyCapacity: 64})
	r := seg.Ready()
	r.Publish(checkedSet(1, 8, 64), 0)
	var e Entry
	r.Take(&e)
	allocs := testing.AllocsPerRun(5, func() { r.Take(&e) })
	if allocs != 0 {
		t.Fatalf("Take allocates %.1f times per call with a warm Entry", allocs)
	}
}

// Many goroutines take while the writer publishes generations of varying sizes. Every taken
// entry must verify (R2) and no (generation, index) may be handed out twice (R1).
func TestConcurrentTakeAndPublish(t *testing.T) {
	const readers, gens = 4, 400
	seg := newTestSegment(t, Options{ReadyCapacity: 64, KeyCapacity: 96})
	r := seg.Ready()
	var (
		mu   sync.Mutex
		seen = map[[2]uint64]bool{}
		done atomic.Bool
		wg   sync.WaitGroup
	)
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var e Entry
			local := make([][2]uint64, 0, 1024)
			for !done.Load() {
				if r.Take(&e) != Taken {
					continue
				}
				if err := verifyEntry(&e); err != nil {
					errs <- err
					return
				}
				local = append(local, [2]uint64{e.Gen, uint64(e.Index)})
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range local {
				if seen[k] {
					errs <- &dupError{k}
					return
				}
				seen[k] = true
			}
		}()
	}
	for g := uint64(1); g <= gens; g++ {
		r.Publish(checkedSet(g, int(g%64)+1, 96), int64(g))
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("readers took nothing")
	}
}

type dupError struct{ k [2]uint64 }

func (d *dupError) Error() string {
	return fmt.Sprintf("entry handed out twice: generation %d index %d", d.k[0], d.k[1])
}
