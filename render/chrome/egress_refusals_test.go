package chrome

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The egress proxy remembers the tunnels the address policy refused only as long as a render can
// ask about them, and for a bounded number of host:ports: a page can make its browser dial as
// many as it likes. 3,000 tunnels refused to distinct loopback ports (render.domains names none
// of them) leave at most refusalLogMax remembered, and the latest refusal is still known.
func TestEgressRefusalLogIsBounded(t *testing.T) {
	e, err := startEgress(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	user, secret := e.newCredentials()
	r := &http.Request{Header: http.Header{}}
	r.SetBasicAuth(user, secret)
	auth := r.Header.Get("Authorization")

	start := time.Now()
	conn, err := net.Dial("tcp", e.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	const tunnels = 3000
	last := ""
	for port := 1; port <= tunnels; port++ {
		last = "127.0.0.1:" + strconv.Itoa(port)
		req := "CONNECT " + last + " HTTP/1.1\r\nHost: " + last + "\r\nProxy-Authorization: " + auth + "\r\n\r\n"
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("tunnel %d: %v", port, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(egressHeader) != "policy" {
			t.Fatalf("tunnel to %s: %d %q, want the policy's 403", last, resp.StatusCode, resp.Header.Get(egressHeader))
		}
	}
	if n := e.refusals.len(); n > refusalLogMax {
		t.Fatalf("%d refused host:ports remembered after %d refusals, want at most %d", n, tunnels, refusalLogMax)
	}
	if !e.refusedRecently(last, start) {
		t.Fatalf("the latest refusal (%s) is forgotten", last)
	}
}

// A refusal older than the log's keep is pruned before the log evicts one a render may still ask
// about; with only fresh refusals at the bound, one arbitrary entry makes room.
func TestRefusalLogPrunesByAgeFirst(t *testing.T) {
	l := refusalLog{keep: time.Minute}
	t0 := time.Unix(1_000_000, 0)
	for i := range refusalLogMax {
		l.record("old:"+strconv.Itoa(i), t0)
	}
	l.record("fresh:0", t0.Add(2*time.Minute))
	if n := l.len(); n != 1 {
		t.Fatalf("%d remembered after the bound was reached with every earlier one older than keep, want 1", n)
	}
	for i := 1; i < refusalLogMax; i++ {
		l.record("fresh:"+strconv.Itoa(i), t0.Add(2*time.Minute))
	}
	l.record("fresh:last", t0.Add(2*time.Minute))
	if n := l.len(); n != refusalLogMax {
		t.Fatalf("%d remembered with every one fresh, want the bound %d", n, refusalLogMax)
	}
	if !l.since("fresh:last", t0.Add(time.Minute)) {
		t.Fatal("the refusal just recorded is not remembered")
	}
}
