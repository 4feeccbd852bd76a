package connguard

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Drain stops an http.Server whose listening socket lives on in another process (a restart or
// an upgrade that keeps the socket, see cmd/supervisor), so that no client sees a connection
// closed under a request it sent:
//
//   - the listener stops accepting; connections the kernel queues from then on wait in the
//     socket's backlog for the next process, and are not refused;
//   - every request already accepted is answered, and from then on with Connection: close, so
//     a keep-alive connection closes after its next answer instead of idling;
//   - a connection left idle is left open for the grace period, for its client to send one
//     more request (answered, with Connection: close) or to close it. http.Server.Shutdown
//     alone closes idle keep-alive connections at once, and a client that picks one of them
//     for its next request as it closes gets no answer (a "socket hang up").
//
// Only then does Shutdown close what is still idle and wait up to its bound for what runs.
// Wire it with Listener (the server's listener), ConnState (the server's ConnState) and
// Handler (around the server's handler). The zero value is ready to use.
type Drain struct {
	draining atomic.Bool
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	ln       net.Listener
}

// Listener wraps ln: once the drain began, its Accept returns http.ErrServerClosed, so the
// server's Serve returns that as on Shutdown.
func (d *Drain) Listener(ln net.Listener) net.Listener {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ln = ln
	return drainListener{Listener: ln, d: d}
}

type drainListener struct {
	net.Listener
	d *Drain
}

func (l drainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil && l.d.draining.Load() {
		return nil, http.ErrServerClosed
	}
	return c, err
}

// ConnState is the server's ConnState hook: it counts the connections open.
func (d *Drain) ConnState(c net.Conn, st http.ConnState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(d.conns, c)
	default:
		if d.conns == nil {
			d.conns = map[net.Conn]struct{}{}
		}
		d.conns[c] = struct{}{}
	}
}

// Handler answers with Connection: close once the drain began: the server closes the
// connection after the answer, and the client opens its next one on the socket's next holder.
func (d *Drain) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// Open is how many connections are open.
func (d *Drain) Open() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// Stop drains srv as the type says: the listener closes at once, the connections open get
// grace to finish (it ends early once none is left), then srv.Shutdown closes the idle ones
// and waits up to bound for the rest, and what still runs then is closed.
func (d *Drain) Stop(srv *http.Server, grace, bound time.Duration) {
	d.draining.Store(true)
	d.mu.Lock()
	ln := d.ln
	d.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	deadline := time.Now().Add(grace)
	for d.Open() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
}
