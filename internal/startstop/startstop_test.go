package startstop

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loop is a service whose goroutine runs until its context ends, and records what it did.
type loop struct {
	BaseStartStop
	starts  atomic.Int32
	running atomic.Int32 // goroutines between their start and their return
	entered chan struct{}
}

func newLoop() *loop { return &loop{entered: make(chan struct{}, 16)} }

func (l *loop) Start(ctx context.Context) error {
	ctx, start, done := l.StartInit(ctx)
	if !start {
		return nil
	}
	l.starts.Add(1)
	l.running.Add(1)
	go func() {
		defer done()
		defer l.running.Add(-1)
		l.entered <- struct{}{}
		<-ctx.Done()
		for range 1000 { // work after the cancel, which Stop must wait for
			runtime.Gosched()
		}
	}()
	return nil
}

var _ Service = (*loop)(nil)

func wait(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // a failure's bound only
		t.Fatal("the service's goroutine did not start")
	}
}

func TestStopWithoutStartIsANoOp(t *testing.T) {
	l := newLoop()
	l.Stop()
	l.Stop()
	if l.Running() {
		t.Fatal("running after a Stop without Start")
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait(t, l.entered)
	l.Stop()
	if n := l.running.Load(); n != 0 {
		t.Fatalf("%d goroutines still running after Stop", n)
	}
}

func TestStopTwiceAndStopWaits(t *testing.T) {
	l := newLoop()
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait(t, l.entered)
	l.Stop()
	if n := l.running.Load(); n != 0 {
		t.Fatalf("Stop returned with %d goroutines running", n)
	}
	l.Stop()
	if l.Running() {
		t.Fatal("running after Stop")
	}
}

// Start while running is a no-op that returns nil; Start after Stop starts afresh.
func TestStartTwiceIsANoOp(t *testing.T) {
	l := newLoop()
	for range 2 {
		if err := l.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, l.entered)
	if n := l.starts.Load(); n != 1 {
		t.Fatalf("two Starts started %d goroutines", n)
	}
	l.Stop()
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait(t, l.entered)
	if n := l.starts.Load(); n != 2 {
		t.Fatalf("Start after Stop: %d starts, want 2", n)
	}
	l.Stop()
}

// The parent context's end stops the goroutine too; Stop after it still returns.
func TestParentContextEnds(t *testing.T) {
	l := newLoop()
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wait(t, l.entered)
	cancel()
	l.Stop()
	if n := l.running.Load(); n != 0 {
		t.Fatalf("%d goroutines running", n)
	}
}

// StopWith lets the service finish its work: the context is not ended until its goroutines
// have returned, and finish is not called without a start.
func TestStopWithFinishesBeforeCancelling(t *testing.T) {
	var b BaseStartStop
	b.StopWith(func() { t.Fatal("finish called without a start") })
	ctx, start, done := b.StartInit(context.Background())
	if !start {
		t.Fatal("not started")
	}
	queue := make(chan int, 3)
	queue <- 1
	queue <- 2
	var drained atomic.Int32
	cancelledEarly := make(chan bool, 1)
	go func() {
		defer done()
		for range queue {
			drained.Add(1)
		}
		cancelledEarly <- ctx.Err() != nil
	}()
	b.StopWith(func() { close(queue) })
	if drained.Load() != 2 {
		t.Fatalf("%d of 2 queued items finished", drained.Load())
	}
	if <-cancelledEarly {
		t.Fatal("the context ended before the work was finished")
	}
	if ctx.Err() == nil {
		t.Fatal("the context outlives the stop")
	}
	b.StopWith(func() { t.Fatal("finish called twice") })
}

// Start and Stop from many goroutines at once (run with -race): every Stop leaves no goroutine
// behind that a later Stop would not wait for, and the last Stop leaves the service stopped.
func TestConcurrentStartStop(t *testing.T) {
	l := newLoop()
	l.entered = make(chan struct{}, 1024)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if i%2 == 0 {
					_ = l.Start(context.Background())
				} else {
					l.Stop()
				}
			}
		}()
	}
	wg.Wait()
	l.Stop()
	if n := l.running.Load(); n != 0 {
		t.Fatalf("%d goroutines running after the last Stop", n)
	}
	if l.Running() {
		t.Fatal("running after the last Stop")
	}
}
