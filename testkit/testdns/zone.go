package testdns

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Zone is what a DNS server started by Listen answers: forward names (A and AAAA, from Addrs)
// and reverse ones (PTR, from Names), every other name NXDOMAIN. A reverse query for an address
// in Hang is held unanswered until Release is called or the test ends, and then answered from
// Names as they are then (NXDOMAIN when they hold none): a resolver that does not answer, or
// answers late. Fields may be changed under Lock once serving.
type Zone struct {
	sync.Mutex
	Addrs map[string][]netip.Addr
	Names map[netip.Addr][]string
	Hang  map[netip.Addr]bool

	released chan struct{}
	once     sync.Once
	queries  int
	held     int
}

// Held is how many queries the server holds unanswered now.
func (z *Zone) Held() int {
	z.Lock()
	defer z.Unlock()
	return z.held
}

// Release answers every held query (from Names, NXDOMAIN for an address without one) and holds
// no more.
func (z *Zone) Release() { z.once.Do(func() { close(z.released) }) }

// Queries is how many queries the server has read.
func (z *Zone) Queries() int {
	z.Lock()
	defer z.Unlock()
	return z.queries
}

// Listen serves z over UDP on a loopback port until the test ends and returns the address,
// for a process whose resolver the test points at it (crawlers.TestDNSEnv), and Resolver's.
// Each query is answered on its own goroutine, so that a held one holds no other.
func Listen(t testing.TB, z *Zone) string {
	t.Helper()
	z.released = make(chan struct{})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z.Release(); pc.Close() })
	go func() {
		for {
			buf := make([]byte, 1500)
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			go func() {
				if resp, err := z.answer(buf[:n]); err == nil {
					pc.WriteTo(resp, from)
				}
			}()
		}
	}()
	return pc.LocalAddr().String()
}

// Resolver is a resolver that asks the server at addr (Listen's) only.
func Resolver(addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func (z *Zone) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	z.Lock()
	z.queries++
	var addrs []netip.Addr
	var ptrs []string
	known := false
	rev, isRev := reverseAddr(name)
	if isRev {
		ptrs, known = z.Names[rev]
		if z.Hang[rev] {
			z.held++
			z.Unlock()
			<-z.released
			z.Lock()
			z.held--
			ptrs, known = z.Names[rev]
		}
	} else {
		for n, a := range z.Addrs {
			if strings.ToLower(strings.TrimSuffix(n, ".")) == name {
				addrs, known = a, true
			}
		}
	}
	z.Unlock()
	return reply(h, q, known, addrs, ptrs)
}

// reverseAddr is the address of an in-addr.arpa or ip6.arpa name.
func reverseAddr(name string) (netip.Addr, bool) {
	if s, ok := strings.CutSuffix(name, ".in-addr.arpa"); ok {
		parts := strings.Split(s, ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(parts[3] + "." + parts[2] + "." + parts[1] + "." + parts[0])
		return a, err == nil
	}
	if s, ok := strings.CutSuffix(name, ".ip6.arpa"); ok {
		nib := strings.Split(s, ".")
		if len(nib) != 32 {
			return netip.Addr{}, false
		}
		var b strings.Builder
		for i := 31; i >= 0; i-- {
			b.WriteString(nib[i])
			if i%4 == 0 && i > 0 {
				b.WriteByte(':')
			}
		}
		a, err := netip.ParseAddr(b.String())
		return a, err == nil
	}
	return netip.Addr{}, false
}

// Released is closed once Release was called.
func (z *Zone) Released() <-chan struct{} { return z.released }
