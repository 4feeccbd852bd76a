// Package connguard bounds what a client that never authenticates can hold of a listener's
// connections. Both of freshq's listeners serve at most http.max_conns connections at once;
// without it, a stranger who opens that many and sends one request without a token each (or
// none) holds every slot until the idle timeout, and the clients with a token wait.
//
// Two rules, applied together:
//   - a connection counts as unauthenticated from its accept until a request on it passes the
//     listener's token check (Authenticated); at most Limit such connections per peer address
//     (an IPv6 peer by its /64, what one host is given) are held at once, and one more from
//     that peer is closed as it is accepted;
//   - a request refused by the token check is answered with Connection: close (Refused), so
//     the refused connection gives its slot back at once instead of idling in keep-alive.
//
// Invariant: a connection is counted against its peer at most once, and uncounted exactly
// once, at its authentication or at its close, whichever comes first.
package connguard

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Listener wraps a net.Listener with the per-peer bound on unauthenticated connections. Serve
// it with ConnContext as the http.Server's ConnContext, so that the handler can mark a
// connection authenticated.
type Listener struct {
	net.Listener
	limit   int
	guarded func() bool

	mu      sync.Mutex
	pending map[netip.Prefix]int // unauthenticated connections per peer
}

// Listen wraps ln: at most limit unauthenticated connections per peer address (limit ≥ 1),
// while guarded reports true, asked at each accept. A listener with no token to check (a
// loopback listener without one) is not guarded: no request on it can fail the check, and
// a burst of fresh connections from one program must not be cut before it sends anything.
func Listen(ln net.Listener, limit int, guarded func() bool) *Listener {
	return &Listener{Listener: ln, limit: max(limit, 1), guarded: guarded, pending: map[netip.Prefix]int{}}
}

// Accept returns the next connection whose peer holds fewer than the limit of unauthenticated
// connections; one beyond it is closed without a word (it has sent nothing the server read).
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer, ok := peerOf(c.RemoteAddr())
		if !ok || !l.guarded() { // not an IP peer (a unix socket), or nothing to check
			return c, nil
		}
		l.mu.Lock()
		over := l.pending[peer] >= l.limit
		if !over {
			l.pending[peer]++
		}
		l.mu.Unlock()
		if over {
			c.Close()
			continue
		}
		return &conn{Conn: c, l: l, peer: peer}, nil
	}
}

// Pending is how many unauthenticated connections addr's peer holds.
func (l *Listener) Pending(addr net.Addr) int {
	peer, _ := peerOf(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[peer]
}

func (l *Listener) release(peer netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[peer]--; l.pending[peer] <= 0 {
		delete(l.pending, peer)
	}
}

// peerOf is the prefix addr's connections are counted under: the IPv4 address, or the IPv6
// address's /64.
func peerOf(addr net.Addr) (netip.Prefix, bool) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	return p, err == nil
}

// conn is an accepted connection, counted against its peer until it authenticates or closes.
type conn struct {
	net.Conn
	l    *Listener
	peer netip.Prefix
	once sync.Once
}

func (c *conn) uncount() { c.once.Do(func() { c.l.release(c.peer) }) }

func (c *conn) Close() error {
	c.uncount()
	return c.Conn.Close()
}

type ctxKey struct{}

// ConnContext is the http.Server's ConnContext: it carries the connection to the handler.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// Authenticated marks the connection of the request ctx belongs to as authenticated: it no
// longer counts against its peer's limit. A request over a connection Listen did not accept
// (a test's recorder, a unix socket) is left alone.
func Authenticated(ctx context.Context) {
	if c, ok := ctx.Value(ctxKey{}).(*conn); ok {
		c.uncount()
	}
}

// Refused marks a response refused by the token check: the server closes its connection once
// it is written, so that a client without the token holds no slot in keep-alive.
func Refused(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
}
