package startstop

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// recorder is a service that records its starts and stops in a shared log, and fails its
// start when told to.
type recorder struct {
	name string
	log  *[]string
	fail error
}

func (r recorder) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	return r.fail
}

func (r recorder) Stop() { *r.log = append(*r.log, "stop "+r.name) }

func TestStartAllStartsInOrderAndStopAllStopsInReverse(t *testing.T) {
	var log []string
	svcs := []Service{recorder{"a", &log, nil}, recorder{"b", &log, nil}, recorder{"c", &log, nil}}
	if err := StartAll(context.Background(), svcs...); err != nil {
		t.Fatalf("StartAll: %v", err)
	}
	StopAll(svcs...)
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("got %q, want %q", log, want)
	}
}

func TestStartAllStopsWhatStartedWhenOneFails(t *testing.T) {
	var log []string
	boom := errors.New("boom")
	svcs := []Service{recorder{"a", &log, nil}, recorder{"b", &log, boom}, recorder{"c", &log, nil}}
	err := StartAll(context.Background(), svcs...)
	if !errors.Is(err, boom) {
		t.Fatalf("StartAll: %v, want %v", err, boom)
	}
	// The service that failed may have started part of itself: it is stopped too (Stop
	// without Start is a no-op), then the ones before it; the ones after it are not touched.
	want := []string{"start a", "start b", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Fatalf("got %q, want %q", log, want)
	}
}

func TestFuncRunsWhatItHasAndSkipsNil(t *testing.T) {
	var log []string
	svcs := []Service{
		Func{StopFunc: func() { log = append(log, "stop only") }},
		Func{StartFunc: func(context.Context) error { log = append(log, "start only"); return nil }},
		Func{},
	}
	if err := StartAll(context.Background(), svcs...); err != nil {
		t.Fatalf("StartAll: %v", err)
	}
	StopAll(svcs...)
	want := []string{"start only", "stop only"}
	if !slices.Equal(log, want) {
		t.Fatalf("got %q, want %q", log, want)
	}
}

func TestStartAllWithLoops(t *testing.T) {
	a, b := newLoop(), newLoop()
	if err := StartAll(context.Background(), a, b); err != nil {
		t.Fatal(err)
	}
	wait(t, a.entered)
	wait(t, b.entered)
	StopAll(a, b)
	if a.Running() || b.Running() || a.running.Load() != 0 || b.running.Load() != 0 {
		t.Fatal("a service still runs after StopAll")
	}
}
