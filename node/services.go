package node

import (
	"context"

	"github.com/freshq/freshq/internal/startstop"
	"github.com/freshq/freshq/store"
)

// The long-running pieces of the workers, each a startstop.Service: stoppable without having
// been started, and twice, and stopped only once its goroutines have returned. Worker 0 starts
// and stops them in the order of its list (worker0.services).

// gcService is the store's value-log GC (store.Store.StartGC and StopGC, which keep the
// contract already: the store does not import startstop).
type gcService struct{ st store.Store }

func (g gcService) Start(context.Context) error { g.st.StartGC(); return nil }
func (g gcService) Stop()                       { g.st.StopGC() }

// sitemapRuns is worker 0's sitemap runs (sitemapruns.Runs). workerStop stops them on a
// bound of its own: Stop waits for the runs, and a run cut in its commit is waited for no longer
// than the stop's finishTimeout.
type sitemapRuns = startstop.Service

var _ startstop.Service = gcService{}
