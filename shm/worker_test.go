package shm

import "testing"

func TestWorkerHeartbeatAndCounters(t *testing.T) {
	seg := newTestSegment(t, Options{Workers: 2})
	if _, err := seg.Worker(2); err == nil {
		t.Fatal("worker index past the capacity accepted")
	}
	if _, err := seg.Worker(-1); err == nil {
		t.Fatal("negative worker index accepted")
	}
	w0, _ := seg.Worker(0)
	w1, _ := seg.Worker(1)
	w1.Start(4242, 10)
	w1.Beat(20)
	w1.Beat(30)
	w1.NoteRestart()
	w1.Add(CounterClaimReady, 3)
	w1.Add(CounterClaimReady, 2)
	w1.Set(CounterSweepMicros, 77)
	w1.Set(CounterSweepMicros, 66)
	st := w1.Status()
	if st.PID != 4242 || st.StartedAtMs != 10 || st.HeartbeatMs != 30 || st.Beats != 2 || st.Restarts != 1 {
		t.Fatalf("status %+v", st)
	}
	if w1.Load(CounterClaimReady) != 5 || w1.Load(CounterSweepMicros) != 66 {
		t.Fatal("counter values wrong")
	}
	if w0.Load(CounterClaimReady) != 0 || w0.Status().Beats != 0 {
		t.Fatal("worker 1's writes leaked into worker 0's block")
	}
	if numNamedCounters > CountersPerWorker {
		t.Fatalf("%d named counters exceed the %d slots", numNamedCounters, CountersPerWorker)
	}
}

func TestWorkerHistogram(t *testing.T) {
	seg := newTestSegment(t, Options{Workers: 1})
	w, _ := seg.Worker(0)
	b := RenderSecondsBuckets[:]
	for _, v := range []float64{0.01, 0.05, 0.3, 61} {
		w.Observe(CounterRenderSeconds, b, v, 1e6)
	}
	want := map[int]uint64{0: 2, 3: 1, len(b): 1}
	for i := range len(b) + 1 {
		if got := w.Load(CounterRenderSeconds + Counter(i)); got != want[i] {
			t.Fatalf("bucket %d holds %d, want %d", i, got, want[i])
		}
	}
	if sum := w.Load(CounterRenderSeconds + Counter(len(b)+1)); sum != 61_360_000 {
		t.Fatalf("sum %d µs, want 61360000", sum)
	}
	if numNamedCounters > CountersPerWorker {
		t.Fatal("the named counters overflow the worker block")
	}
}
