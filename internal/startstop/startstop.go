// Package startstop is the lifecycle every long-running piece of a freshq process shares: a
// Service starts with Start and stops with Stop, and a process is assembled by starting its
// services in order and stopping them in the reverse order it names.
//
// # Contract
//
// Every Service, and BaseStartStop which implements the bookkeeping, keeps these promises:
//
//   - Stop without Start is a no-op: a process that failed half-way through its start stops
//     every service it built, started or not, with one code path.
//   - Stop twice is safe: the second call returns at once (after the first has finished, if
//     it runs concurrently).
//   - Start while running is a no-op that returns nil: the service keeps running as it was
//     (a Start that meets a Stop in progress is such a Start, and the Stop wins). Start after
//     Stop has returned starts it afresh.
//   - Stop returns only once the service's goroutines have returned: after Stop, the service
//     touches nothing (a store it wrote to may be closed).
//   - Start and Stop may be called from different goroutines at once.
//
// A service's own goroutine ends when the context StartInit gives it ends; Stop ends it. A
// service that must finish its work rather than drop it (a queue to drain) stops with
// StopWith, which asks it to finish in its own way before it is waited for.
package startstop

import (
	"context"
	"sync"
)

// Service is a long-running piece of a process with the contract of the package doc.
type Service interface {
	// Start starts the service's goroutines; they run until Stop. Those of a service built on
	// BaseStartStop also end with ctx; Stop is called all the same, to wait for them. An
	// error may leave part of the service running: Stop stops it.
	Start(ctx context.Context) error
	// Stop stops the service and waits for its goroutines to return.
	Stop()
}

// BaseStartStop is embedded by a service to keep the contract. Its zero value is ready. A
// service's Start calls StartInit and, if told to start, runs its goroutine, which calls the
// returned done when it returns:
//
//	func (s *svc) Start(ctx context.Context) error {
//		ctx, start, done := s.StartInit(ctx)
//		if !start {
//			return nil
//		}
//		go func() { defer done(); s.run(ctx) }()
//		return nil
//	}
type BaseStartStop struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	stopped chan struct{} // closed by done
	stopMu  sync.Mutex    // serialises stops, so that a second Stop waits for the first
}

// StartInit begins a start. If the service is already running, start is false and the caller
// returns at once. Otherwise ctx is a child of the given one that Stop ends, and done must be
// called exactly once, when the service's goroutines have all returned.
func (b *BaseStartStop) StartInit(ctx context.Context) (_ context.Context, start bool, done func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return ctx, false, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	b.running, b.cancel, b.stopped = true, cancel, stopped
	var once sync.Once
	return ctx, true, func() { once.Do(func() { close(stopped) }) }
}

// Stop ends the context StartInit gave and waits for done. Without a start, or once stopped,
// it is a no-op.
func (b *BaseStartStop) Stop() { b.StopWith(nil) }

// StopWith is Stop for a service that finishes its work before it returns: finish (if not
// nil) is called first and should make the service's goroutines return once their work is done
// (closing the queue they drain, say); the context StartInit gave is ended only after they
// have returned. Without a start, or once stopped, neither finish is called nor is anything
// waited for.
func (b *BaseStartStop) StopWith(finish func()) {
	b.stopMu.Lock()
	defer b.stopMu.Unlock()
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return
	}
	cancel, stopped := b.cancel, b.stopped
	b.mu.Unlock()
	if finish != nil {
		finish()
	} else {
		cancel()
	}
	<-stopped
	cancel()
	b.mu.Lock()
	b.running, b.cancel, b.stopped = false, nil, nil
	b.mu.Unlock()
}

// Running reports whether the service has been started and not yet stopped.
func (b *BaseStartStop) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}
