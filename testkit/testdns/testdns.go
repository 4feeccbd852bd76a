// Package testdns answers the process's DNS lookups from a table, for tests that must see a
// name resolve to a chosen address (DNS rebinding, a name that points inside the network)
// without a network. It replaces net.DefaultResolver for the duration of one test, so a test
// that uses it must not run in parallel with others that resolve names.
package testdns

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Use makes every lookup of a name in answers (case-insensitive, without the trailing dot)
// return its addresses, and every other name NXDOMAIN, until the test ends. Names in
// /etc/hosts (localhost) still resolve from there first.
func Use(t testing.TB, answers map[string][]netip.Addr) {
	t.Helper()
	table := make(map[string][]netip.Addr, len(answers))
	for name, addrs := range answers {
		table[strings.ToLower(strings.TrimSuffix(name, "."))] = addrs
	}
	old := net.DefaultResolver
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serve(server, table)
		return client, nil
	}}
	t.Cleanup(func() { net.DefaultResolver = old })
}

// serve answers queries on a stream connection (two-byte length prefix, as DNS over TCP).
func serve(c net.Conn, table map[string][]netip.Addr) {
	defer c.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp, err := answer(q, table)
		if err != nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

func answer(query []byte, table map[string][]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	addrs, known := table[strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))]
	return reply(h, q, known, addrs, nil)
}

// reply is the answer to q of a query with header h: the name's addresses of q's type (A or
// AAAA) and, for a PTR question, its names; NXDOMAIN when the name is not known.
func reply(h dnsmessage.Header, q dnsmessage.Question, known bool, addrs []netip.Addr, ptrs []string) ([]byte, error) {
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	for _, a := range addrs {
		var err error
		switch {
		case q.Type == dnsmessage.TypeA && a.Unmap().Is4():
			err = b.AResource(rr, dnsmessage.AResource{A: a.Unmap().As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6():
			err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	if q.Type == dnsmessage.TypePTR {
		for _, n := range ptrs {
			ptr, err := dnsmessage.NewName(strings.TrimSuffix(n, ".") + ".")
			if err != nil {
				return nil, err
			}
			if err := b.PTRResource(rr, dnsmessage.PTRResource{PTR: ptr}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}
