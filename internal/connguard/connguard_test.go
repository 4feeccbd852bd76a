package connguard

import (
	"context"
	"net"
	"testing"
	"time"
)

// A peer holds at most the limit of unauthenticated connections; one that authenticates, or
// closes, gives its place back, once.
func TestListenerBoundsUnauthenticatedPerPeer(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, 2, func() bool { return true })
	defer l.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	next := func() net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no connection accepted")
			return nil
		}
	}
	a, b := dial(), dial()
	ca, cb := next(), next()
	over := dial() // closed as it is accepted: its read ends
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil {
		t.Fatal("a third unauthenticated connection from the peer was kept")
	}
	Authenticated(ConnContext(context.Background(), ca))
	Authenticated(ConnContext(context.Background(), ca)) // twice: counted once
	ca.Close()                                           // and its close does not count it again
	if got := l.Pending(cb.RemoteAddr()); got != 1 {
		t.Fatalf("pending %d with one authenticated and one not, want 1", got)
	}
	dial()
	cc := next()
	if got := l.Pending(cc.RemoteAddr()); got != 2 {
		t.Fatalf("pending %d after one authenticated and one new, want 2", got)
	}
	cb.Close()
	cc.Close()
	if got := l.Pending(cc.RemoteAddr()); got != 0 {
		t.Fatalf("pending %d after every connection closed", got)
	}
	_, _ = a, b
}

// An IPv6 peer is counted by its /64: one host's addresses are one peer.
func TestPeerOfIPv6Is64(t *testing.T) {
	p1, _ := peerOf(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1")})
	p2, _ := peerOf(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::9")})
	p3, _ := peerOf(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1")})
	v4, _ := peerOf(&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7")})
	if p1 != p2 || p1 == p3 || v4.String() != "192.0.2.7/32" {
		t.Fatalf("%v %v %v %v", p1, p2, p3, v4)
	}
}
