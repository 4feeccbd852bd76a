package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// remoteServer serves the remote renderer endpoints over 20 due rows, the ready set disabled so
// that every grant goes through the index fallback.
func remoteServer(t *testing.T, yaml string) (*qtest.Env, *httptest.Server) {
	e := qtest.New(t, "queue:\n  lease_ttl: 10m\n  ready: {enabled: false}\n"+yaml, start, shm.Options{})
	for i := range 20 {
		e.Put(fmt.Sprintf("desktop|https://shop.test/c/%02d", i), start-hour, true, 0, store.Lanes{NeverRendered: true})
	}
	index := &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}
	x := &Remote{
		Applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
		Claimer: qtest.Must(claim.New(claim.Options{Segment: e.Seg, Worker: e.Worker0, Fallback: index, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now, Holder: 0xffff}))(t)}
	mux := http.NewServeMux()
	x.Register(mux)
	(&Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return e, srv
}

func postJSON(t *testing.T, srv *httptest.Server, path string, in, out any) (int, wire.ErrorBody) {
	t.Helper()
	b, _ := json.Marshal(in)
	if s, ok := in.(string); ok {
		b = []byte(s)
	}
	resp, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	json.NewDecoder(resp.Body).Decode(&raw)
	var ae wire.ErrorBody
	if resp.StatusCode/100 != 2 {
		json.Unmarshal(raw, &ae)
	} else if out != nil {
		json.Unmarshal(raw, out)
	}
	return resp.StatusCode, ae
}

// A remote's claim honours the TTL it asks for within [1m, queue.lease_ttl], holds its leases
// under its own name (shown by HolderName, as explain shows it), and refuses a bad TTL or name
// naming the field.
func TestRemoteClaimTTLAndHolder(t *testing.T) {
	e, srv := remoteServer(t, "")
	var resp wire.RemoteClaimResponse
	if code, ae := postJSON(t, srv, "/v1/claim", `{"limit": 2, "lease": "3m", "renderer": "farm-eu.1"}`, &resp); code != 200 || len(resp.Jobs) != 2 {
		t.Fatalf("%d %+v %+v", code, ae, resp)
	}
	for _, j := range resp.Jobs {
		li, ok := e.Seg.Leases().Lookup(j.KeyHash, e.Now())
		if !ok || li.ExpiresAtMs-e.Now() != 3*60_000 || intake.HolderName(li.Holder) != "remote:farm-eu.1" {
			t.Fatalf("lease %+v (%s)", li, intake.HolderName(li.Holder))
		}
		if j.URL == "" || j.Device != "desktop" {
			t.Fatalf("job %+v", j)
		}
		// Explain names the holder.
		r, err := http.Get(srv.URL + "/v1/targets?url=" + url.QueryEscape(j.URL))
		if err != nil {
			t.Fatal(err)
		}
		var ex wire.Explanation
		json.NewDecoder(r.Body).Decode(&ex)
		r.Body.Close()
		if ex.Lease == nil || ex.Lease.HolderName != "remote:farm-eu.1" {
			t.Fatalf("explain: %+v", ex.Lease)
		}
	}
	if intake.HolderName(shm.HoldHolder) != "held after delete/rush/wait" {
		t.Fatalf("a hold: %s", intake.HolderName(shm.HoldHolder))
	}
	if intake.HolderName(7<<16|2) != "worker 2 (pid 7)" || intake.HolderName(intake.RemoteHolder(intake.DefaultRenderer)) != "remote:remote" {
		t.Fatal(intake.HolderName(7<<16|2), intake.HolderName(intake.RemoteHolder(intake.DefaultRenderer)))
	}
	for body, field := range map[string]string{
		`{"limit": 1, "lease": "30s"}`:            "lease",
		`{"limit": 1, "lease": "11m"}`:            "lease",
		`{"limit": 1, "lease": "soon"}`:           "lease",
		`{"limit": 1, "renderer": "Farm EU"}`:     "renderer",
		`{"limit": 1, "renderer": "elevenchars"}`: "renderer",
		`{"limit": 0}`:                            "limit",
	} {
		if code, ae := postJSON(t, srv, "/v1/claim", body, nil); code != 400 || ae.Field != field {
			t.Errorf("%s: %d %+v, want 400 naming %s", body, code, ae, field)
		}
	}
}

// One remote holds at most queue.max_remote_leases: a claim is trimmed to the room left, and
// refused with 429 when there is none; another remote is not affected, and a release makes room.
func TestRemoteLeasesCappedPerHolder(t *testing.T) {
	e, srv := remoteServer(t, "  max_remote_leases: 3\n")
	var a wire.RemoteClaimResponse
	if code, _ := postJSON(t, srv, "/v1/claim", `{"limit": 5, "renderer": "a"}`, &a); code != 200 || len(a.Jobs) != 3 {
		t.Fatalf("trimmed claim: %d %d jobs", code, len(a.Jobs))
	}
	if code, ae := postJSON(t, srv, "/v1/claim", `{"limit": 1, "renderer": "a"}`, nil); code != 429 || ae.Error == "" {
		t.Fatalf("over the cap: %d %+v", code, ae)
	}
	var b wire.RemoteClaimResponse
	if code, _ := postJSON(t, srv, "/v1/claim", `{"limit": 2, "renderer": "b"}`, &b); code != 200 || len(b.Jobs) != 2 {
		t.Fatalf("another remote: %d %d", code, len(b.Jobs))
	}
	j := a.Jobs[0]
	if code, _ := postJSON(t, srv, "/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: j.Lease}, nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if n := e.Seg.Leases().CountHolder(intake.RemoteHolder("a"), e.Now()); n != 2 {
		t.Fatalf("a holds %d after a release", n)
	}
	if code, _ := postJSON(t, srv, "/v1/claim", `{"limit": 5, "renderer": "a"}`, &a); code != 200 || len(a.Jobs) != 1 {
		t.Fatalf("after a release: %d %d", code, len(a.Jobs))
	}
}

// Extend and release take the lease as handed out: a lease that cannot be this key's is 400
// naming its field, one no longer held is 409; an extend returns the lease to use from then on.
func TestRemoteLeaseExtendAndRelease(t *testing.T) {
	e, srv := remoteServer(t, "")
	var c wire.RemoteClaimResponse
	postJSON(t, srv, "/v1/claim", `{"limit": 2, "lease": "2m"}`, &c)
	j, other := c.Jobs[0], c.Jobs[1]
	e.Advance(60_000)
	var ext wire.LeaseResponse
	if code, ae := postJSON(t, srv, "/v1/leases/extend", wire.LeaseRequest{Key: j.Key, Lease: j.Lease, TTL: "5m"}, &ext); code != 200 {
		t.Fatalf("extend: %d %+v", code, ae)
	}
	if li, _ := e.Seg.Leases().Lookup(j.KeyHash, e.Now()); li.ExpiresAtMs != e.Now()+5*60_000 || ext.ExpiresAt.UnixMilli() != li.ExpiresAtMs {
		t.Fatalf("extended to %d, answer %v", li.ExpiresAtMs-e.Now(), ext.ExpiresAt)
	}
	for name, c := range map[string]struct {
		req   wire.LeaseRequest
		code  int
		field string
	}{
		"the lease before the extend": {wire.LeaseRequest{Key: j.Key, Lease: j.Lease}, 409, "lease"},
		"a slot past the table":       {wire.LeaseRequest{Key: j.Key, Lease: wire.Lease{Slot: 1 << 31, State: ext.Lease.State, KeyHash: j.KeyHash}}, 400, "lease.slot"},
		"another key's lease":         {wire.LeaseRequest{Key: j.Key, Lease: other.Lease}, 400, "lease.key_hash"},
		"no key":                      {wire.LeaseRequest{Lease: ext.Lease}, 400, "key"},
		"a TTL over lease_ttl":        {wire.LeaseRequest{Key: j.Key, Lease: ext.Lease, TTL: "1h"}, 400, "lease"},
	} {
		if code, ae := postJSON(t, srv, "/v1/leases/extend", c.req, nil); code != c.code || ae.Field != c.field {
			t.Errorf("%s: %d %+v, want %d naming %s", name, code, ae, c.code, c.field)
		}
	}
	if code, _ := postJSON(t, srv, "/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: ext.Lease}, nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	if _, ok := e.Seg.Leases().Lookup(j.KeyHash, e.Now()); ok {
		t.Fatal("a released lease is still live: the row is not claimable at once")
	}
	if code, ae := postJSON(t, srv, "/v1/leases/release", wire.LeaseRequest{Key: j.Key, Lease: ext.Lease}, nil); code != 409 || ae.Field != "lease" {
		t.Fatalf("release twice: %d %+v", code, ae)
	}
	// A lease that lapsed is no longer held.
	e.Advance(2 * 60_000)
	if code, _ := postJSON(t, srv, "/v1/leases/extend", wire.LeaseRequest{Key: other.Key, Lease: other.Lease}, nil); code != 409 {
		t.Fatalf("extend a lapsed lease: %d", code)
	}
}

// The internal claim carries the TTL a render worker asks for; a negative one is 400 naming
// ttl_ms.
func TestInternalClaimCarriesTTL(t *testing.T) {
	e, _ := remoteServer(t, "")
	mux := http.NewServeMux()
	(&Control{Index: &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now},
		Applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var resp wire.ClaimResponse
	if code, ae := postJSON(t, srv, wire.PathClaim, `{"n": 1, "holder": 5, "ttl_ms": 180000}`, &resp); code != 200 || len(resp.Jobs) != 1 {
		t.Fatalf("%d %+v", code, ae)
	}
	if li, _ := e.Seg.Leases().Lookup(resp.Jobs[0].KeyHash, e.Now()); li.ExpiresAtMs-e.Now() != 180_000 || li.Holder != 5 {
		t.Fatalf("lease %+v", li)
	}
	if code, ae := postJSON(t, srv, wire.PathClaim, `{"n": 1, "holder": 5, "ttl_ms": -1}`, nil); code != 400 || ae.Field != "ttl_ms" {
		t.Fatalf("negative TTL: %d %+v", code, ae)
	}
}
