package api

import (
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// A remote renderer's jobs take their host's slots like a local worker's, but the remote never
// sees them: worker 0 gives a slot back when the job's result or release arrives, and keeps it
// as long as an extended lease.
func TestRemoteJobsHoldTheirHostSlot(t *testing.T) {
	e, srv := remoteServer(t, "render:\n  hosts: {max_concurrency: 2}\n") // every row is shop.test's
	host := shm.HostHash([]byte("shop.test"))
	inFlight := func() int { return hosts.InFlight(e.Seg.Leases(), host, 2, e.Now()) }
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

// A delete or a rush revokes a remote renderer's lease while it renders: its result is fenced
// and its release answered 409, so worker 0 gives back the host slot it held for the remote
// with the revocation. A host limited to 1 has its next job granted at once, not after the
// slot's lease TTL.
func TestRevokedRemoteLeaseGivesBackItsHostSlot(t *testing.T) {
	for _, revoke := range []string{"delete", "rush"} {
		t.Run(revoke, func(t *testing.T) {
			e := qtest.New(t, "queue:\n  lease_ttl: 10m\n  ready: {enabled: false}\nrender:\n  hosts: {max_concurrency: 1}\n", start, shm.Options{})
			for i := range 3 {
				e.Put(fmt.Sprintf("desktop|https://shop.test/c/%02d", i), start-hour, true, 0, store.Lanes{NeverRendered: true})
			}
			locks := &intake.KeyLocks{}
			index := &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}
			mux := http.NewServeMux()
			(&Remote{
				Applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
				Claimer: qtest.Must(claim.New(claim.Options{Segment: e.Seg, Worker: e.Worker0, Fallback: index, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now, Holder: 0xffff}))(t)}).Register(mux)
			(&Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
			(&Operate{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			host := shm.HostHash([]byte("shop.test"))

			var c wire.RemoteClaimResponse
			if code, _ := postJSON(t, srv, "/v1/claim", `{"limit": 1, "renderer": "farm"}`, &c); code != 200 || len(c.Jobs) != 1 {
				t.Fatalf("claim: %d, %d jobs", code, len(c.Jobs))
			}
			j := c.Jobs[0]
			switch revoke {
			case "delete":
				req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1/targets?url="+url.QueryEscape(j.URL), nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("delete: %v %v", resp, err)
				}
				resp.Body.Close()
			case "rush":
				if code, ae := postJSON(t, srv, "/v1/prioritize", map[string]string{"url": j.URL, "mode": "rush"}, nil); code != 200 {
					t.Fatalf("rush: %d %+v", code, ae)
				}
			}
			if n := hosts.InFlight(e.Seg.Leases(), host, 1, e.Now()); n != 0 {
				t.Fatalf("%d of shop.test in flight after the %s revoked the remote's lease, want 0", n, revoke)
			}
			if code, _ := postJSON(t, srv, "/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: j.Lease}, nil); code != http.StatusConflict {
				t.Fatalf("release after the %s: %d, want 409", revoke, code)
			}
			var next wire.RemoteClaimResponse
			if code, _ := postJSON(t, srv, "/v1/claim", `{"limit": 1, "renderer": "other"}`, &next); code != 200 || len(next.Jobs) != 1 {
				t.Fatalf("the next claim of shop.test: %d, %d jobs; want one at once", code, len(next.Jobs))
			}
		})
	}
}
