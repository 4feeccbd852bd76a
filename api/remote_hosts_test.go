package api

import (
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// A remote renderer's jobs take their host's slots like a local worker's, but the remote never
// sees them: worker 0 gives a slot back when the job's result or release arrives, and keeps it
// as long as an extended lease.
func TestRemoteJobsHoldTheirHostSlot(t *testing.T) {
	e, srv := remoteServer(t, "render:\n  hosts: {max_concurrency: 2}\n") // every row is shop.test's
	host := shm.HostHash([]byte("shop.test"))
	inFlight := func() int { return e.Seg.Leases().HostInFlight(host, 2, e.Now()) }
	var c wire.RemoteClaimResponse
	if code, ae := postJSON(t, srv, "/v1/claim", `{"limit": 5, "renderer": "farm"}`, &c); code != 200 || len(c.Jobs) != 2 {
		t.Fatalf("claim of 5 from a host limited to 2: %d %+v, %d jobs", code, ae, len(c.Jobs))
	}
	if c.Jobs[0].HostToken != nil {
		t.Fatal("a remote's job carries its host slot; worker 0 keeps it")
	}
	var more wire.RemoteClaimResponse
	if code, _ := postJSON(t, srv, "/v1/claim", `{"limit": 1, "renderer": "other"}`, &more); code != 200 || len(more.Jobs) != 0 {
		t.Fatalf("a claim while the host is full: %d, %d jobs", code, len(more.Jobs))
	}
	// A release gives the slot back.
	j := c.Jobs[0]
	if code, _ := postJSON(t, srv, "/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: j.Lease}, nil); code != 200 || inFlight() != 1 {
		t.Fatalf("release: %d, %d in flight after", code, inFlight())
	}
	// An extend keeps the slot as long as the lease: past the claim's TTL, it is still held.
	k := c.Jobs[1]
	e.Advance(5 * 60_000)
	var ext wire.LeaseResponse
	if code, _ := postJSON(t, srv, "/v1/leases/extend", wire.LeaseRequest{Key: k.Key, Lease: k.Lease, TTL: "10m"}, &ext); code != 200 {
		t.Fatalf("extend: %d", code)
	}
	e.Advance(6 * 60_000) // 11 min after the claim of a 10 min lease
	if inFlight() != 1 {
		t.Fatalf("%d in flight after the extend, want the extended job's 1", inFlight())
	}
	// A result gives it back.
	res := wire.Result{Key: k.Key, Outcome: "ok", Status: 200, Body: []byte("<html>ok</html>"), Lease: ext.Lease}
	var st wire.ApplyStats
	if code, ae := postJSON(t, srv, "/v1/results", wire.ResultsRequest{Results: []wire.Result{res}}, &st); code != 200 || st.Applied != 1 {
		t.Fatalf("result: %d %+v %+v", code, ae, st)
	}
	if inFlight() != 0 {
		t.Fatalf("%d in flight after the result", inFlight())
	}
	if n := e.Seg.Leases().CountHolder(intake.RemoteHolder("farm"), e.Now()); n != 0 {
		t.Fatalf("farm holds %d row leases at the end", n)
	}
}
