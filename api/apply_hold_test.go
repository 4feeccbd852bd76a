package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// postLease posts a lease request to a remote endpoint and returns the status.
func postLease(t *testing.T, srv *httptest.Server, path string, req wire.LeaseRequest) int {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A remote release that arrives while the key's result is being applied (between the check of
// its lease and its commit) waits for the key's lock: the result commits and releases the
// lease with its grace, and the release then finds it no longer held (409). Before, the
// release freed the key with no grace while the result still committed.
func TestRemoteReleaseWaitsForTheResultsCommit(t *testing.T) {
	n := newFenceNode(t)
	mux := http.NewServeMux()
	(&Remote{Applier: n.applier}).Register(mux)
	remote := httptest.NewServer(mux)
	defer remote.Close()
	n.do(http.MethodPost, "/v1/targets", `[{"url": "`+shoes+`"}]`)
	for _, path := range []string{"/v1/leases/release", "/v1/leases/extend"} {
		lease := grant(t, n.Env, shoesKey)
		var code int
		done := n.inWindow(func() { code = postLease(t, remote, path, wire.LeaseRequest{Key: shoesKey, Lease: lease}) })
		st, err := n.applier.Apply([]wire.Result{{Key: shoesKey, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}})
		if err != nil || st.Applied != 1 {
			t.Fatalf("%s: apply %+v %v", path, st, err)
		}
		<-done
		if code != http.StatusConflict {
			t.Fatalf("%s during the apply: %d, want 409 after it", path, code)
		}
		grace := n.Config().Queue.ReleaseGrace.Ms()
		if info, ok := n.Seg.Leases().Lookup(shm.KeyHash(shoesKey), n.Now()); !ok || !info.Released || info.ExpiresAtMs != n.Now()+grace {
			t.Fatalf("%s: the key after the apply: %+v %v, want its release grace", path, info, ok)
		}
		n.Advance(grace)
	}
}
