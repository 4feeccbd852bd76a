package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// finishTimeout bounds, after the control socket's drain, how long worker 0 waits for the
// sitemap runs to stop and for the requests it cut to return.
const finishTimeout = 3 * time.Second

// workerStop stops worker 0's writers: the control socket's requests and the sitemap runs.
type workerStop struct {
	srv      *http.Server
	inflight *handlers
	sitemaps sitemapRuns
	log      zerolog.Logger
	after    func(time.Duration) <-chan time.Time // time.After; a test fires its own
	drain    time.Duration                        // supervisor.shutdown_timeout
}

// run stops the writers and reports whether none is left, so that the store may be closed.
//
// The socket stops accepting and finishes the requests it has (the render workers, stopped
// first, have delivered their results already) within the drain bound. A request still running
// then (a bulk upload may take http.bulk_timeout) has its connection closed, and the requests
// and the sitemap runs get finishTimeout more to return, on a bound of their own. If a writer
// is still running past it, run reports false: the store is then left open, not closed under
// it. A process that exits without closing Badger loses nothing acknowledged (the store
// recovers from its write-ahead log at the next open, as after a kill), while a close under a
// live writer fails that write after it may have been half-applied.
func (w *workerStop) run() bool {
	drained := make(chan struct{})
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.after(w.drain):
			cancel()
		case <-drained:
		}
	}()
	err := w.srv.Shutdown(sctx)
	close(drained)
	if err != nil {
		w.log.Warn().Err(err).Int("requests", w.inflight.count()).Dur("shutdown_timeout", w.drain).
			Msg("control socket did not drain in time; closing its connections")
		w.srv.Close()
	}
	fctx, fcancel := context.WithCancel(context.Background())
	defer fcancel()
	bound := w.after(finishTimeout)
	go func() {
		select {
		case <-bound:
			fcancel()
		case <-fctx.Done():
		}
	}()
	ok := true
	runsStopped := make(chan struct{})
	go func() { w.sitemaps.Stop(); close(runsStopped) }()
	select {
	case <-runsStopped:
	case <-fctx.Done():
		w.log.Error().Msg("sitemap runs did not stop in time")
		ok = false
	}
	select {
	case <-w.inflight.idle():
	case <-fctx.Done():
		w.log.Error().Int("requests", w.inflight.count()).Msg("requests still running")
		ok = false
	}
	if !ok {
		w.log.Error().Msg("writers still running past the stop's bound; the store is left open rather than closed under them (it recovers at the next start)")
	}
	return ok
}

// handlers counts the control socket's requests in progress.
type handlers struct {
	mu      sync.Mutex
	n       int
	waiting []chan struct{} // closed when n drops to 0
}

// wrap counts next's requests while they run.
func (h *handlers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
		defer h.leave()
		next.ServeHTTP(w, r)
	})
}

func (h *handlers) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n--; h.n == 0 {
		for _, c := range h.waiting {
			close(c)
		}
		h.waiting = nil
	}
}

// idle returns a channel closed once no request runs.
func (h *handlers) idle() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := make(chan struct{})
	if h.n == 0 {
		close(c)
	} else {
		h.waiting = append(h.waiting, c)
	}
	return c
}

func (h *handlers) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// listenUnix listens on path, mode 0600, replacing a stale socket left by a killed worker 0.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
