package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
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
		grace := n.Policy().Config().Queue.ReleaseGrace.Ms()
		if info, ok := n.Seg.Leases().Lookup(shm.KeyHash(shoesKey), n.Now()); !ok || !info.Released || info.ExpiresAtMs != n.Now()+grace {
			t.Fatalf("%s: the key after the apply: %+v %v, want its release grace", path, info, ok)
		}
		n.Advance(grace)
	}
}

// A lease that would lapse while its result commits is held through the commit: no other grant
// of the key can be made meanwhile, and the result is applied under the grant it carries.
func TestApplyHoldsTheLeaseThroughTheCommit(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/c/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	h := shm.KeyHash(key)
	l, st := e.Seg.Leases().Acquire(h, e.Now(), 1000, 1) // lapses in a second
	if st != shm.Acquired {
		t.Fatal(st)
	}
	var during shm.AcquireStatus
	a := &intake.Applier{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Policy: e.Policy, Now: e.Now,
		Writer: writerFunc(func(ws []store.Write) error {
			e.Advance(2000) // the commit outlasts the lease's TTL
			_, during = e.Seg.Leases().Acquire(h, e.Now(), 600_000, 2)
			return e.Store.WriteSchedules(ws)
		})}
	res, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Lease: intake.WireLease(l)}})
	if err != nil || res.Applied != 1 {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if during != shm.Held {
		t.Fatalf("another grant while the result committed: %v, want held", during)
	}
	if info, ok := e.Seg.Leases().Lookup(h, e.Now()); !ok || !info.Released {
		t.Fatalf("after the commit: %+v %v, want the release grace", info, ok)
	}
}

// When the funnel commits part of a batch and fails the rest, the leases of the results that
// committed are released: the retry of the batch finds them fenced and applies only the rest.
func TestApplyReleasesTheLeasesOfWhatCommitted(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	var rs []wire.Result
	for i := range 2 {
		key := []byte(fmt.Sprintf("desktop|https://a.test/c/%d", i))
		e.Put(string(key), start-hour, false, 0, store.Lanes{})
		rs = append(rs, wire.Result{Key: key, Outcome: "ok", Status: 200, Lease: grant(t, e, key)})
	}
	fail := true
	a := &intake.Applier{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Policy: e.Policy, Now: e.Now,
		Writer: writerFunc(func(ws []store.Write) error {
			if !fail {
				return e.Store.WriteSchedules(ws)
			}
			fail = false
			if err := e.Store.WriteSchedules(ws[:1]); err != nil {
				return err
			}
			return &store.PartialWriteError{Committed: []bool{true, false}, Err: fmt.Errorf("store: commit 1 writes: disk full")}
		})}
	if _, err := a.Apply(rs); err == nil {
		t.Fatal("a partly failed commit reported no error")
	}
	if err := e.Seg.Leases().Check(intake.ShmLease(rs[0].Lease), shm.KeyHash(rs[0].Key), e.Now()); err == nil {
		t.Fatal("the committed result's lease is still held")
	}
	if err := e.Seg.Leases().Check(intake.ShmLease(rs[1].Lease), shm.KeyHash(rs[1].Key), e.Now()); err != nil {
		t.Fatalf("the uncommitted result's lease: %v", err)
	}
	st, err := a.Apply(rs) // the sender's retry
	if err != nil || st.Applied != 1 || st.Fenced != 1 || st.FencedItems[0].Index != 0 {
		t.Fatalf("retry: %+v %v, want the committed one fenced and the other applied", st, err)
	}
}
