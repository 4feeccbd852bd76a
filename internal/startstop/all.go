package startstop

import "context"

// StartAll starts services in their order. If one fails, StartAll stops it (its start may have
// left part of it running) and then every service started before it, in the reverse order, and
// returns its error: a process whose start failed half-way is left with nothing running.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAll(services[:i+1]...)
			return err
		}
	}
	return nil
}

// StopAll stops services one after another in the reverse of their order, so that a service
// stops before every service it was started after (and may depend on). Each Stop returns before
// the next begins. Stopping a list that was never started, or only in part, is safe: Stop
// without Start is a no-op.
func StopAll(services ...Service) {
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}

// Func is a Service made of two functions, either of which may be nil (nothing to do). It puts
// into an ordered list a step that only starts (a reconcile, a listener that only opens) or only
// stops (the stop of a service that must come at another place in the reverse order than its
// start's mirror), so that the list, read backwards, is the stop order. The functions keep the
// contract themselves: StopFunc must be a no-op when what it stops was never started.
type Func struct {
	StartFunc func(ctx context.Context) error
	StopFunc  func()
}

// Start calls StartFunc, if any.
func (f Func) Start(ctx context.Context) error {
	if f.StartFunc == nil {
		return nil
	}
	return f.StartFunc(ctx)
}

// Stop calls StopFunc, if any.
func (f Func) Stop() {
	if f.StopFunc != nil {
		f.StopFunc()
	}
}

var _ Service = Func{}
