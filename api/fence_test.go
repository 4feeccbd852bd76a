package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/wire"
)

// fenceNode is worker 0's writers over one store, wired as worker 0 wires them: one KeyLocks,
// every write through one sweep.Changes.
type fenceNode struct {
	*qtest.Env
	locks   *intake.KeyLocks
	changes *sweep.Changes
	applier *intake.Applier
	srv     *httptest.Server
	waiting chan struct{} // a lock had to wait
}

const fenceYAML = "routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\nqueue: {release_grace: 5s, ready: {sweep_interval: 10s}}\n"

func newFenceNode(t *testing.T) *fenceNode {
	e := qtest.New(t, fenceYAML, start, shm.Options{})
	n := &fenceNode{Env: e, locks: &intake.KeyLocks{}, changes: sweep.NewChanges(), waiting: make(chan struct{}, 8)}
	n.locks.TestOnWait = func() { n.waiting <- struct{}{} }
	writer := n.changes.Wrap(e.Store)
	targets := &Targets{Store: e.Store, Writer: writer, Locks: n.locks, Policy: e.Policy, Now: e.Now}
	n.applier = &intake.Applier{Store: e.Store, Writer: writer, Locks: n.locks, Seg: e.Seg, Policy: e.Policy, Now: e.Now}
	mux := http.NewServeMux()
	targets.Register(mux)
	(&Operate{Targets: targets, Seg: e.Seg}).Register(mux)
	(&Explain{Store: e.Store, Seg: e.Seg, Policy: e.Policy, Now: e.Now, Deleter: writer, Locks: n.locks}).Register(mux)
	n.srv = httptest.NewServer(mux)
	t.Cleanup(n.srv.Close)
	return n
}

func (n *fenceNode) do(method, path, body string) int {
	n.T.Helper()
	req, _ := http.NewRequest(method, n.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.T.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (n *fenceNode) deleteTarget(u string) int {
	return n.do(http.MethodDelete, "/v1/targets?url="+url.QueryEscape(u), "")
}

// inWindow runs op between the applier's reads and its commit, and waits until op either
// finished (it raced into the window) or waits for the key's lock (it is serialised after the
// result). No timing is involved.
func (n *fenceNode) inWindow(op func()) (done chan struct{}) {
	done = make(chan struct{})
	n.applier.TestAfterDecide = func() {
		go func() { op(); close(done) }()
		select {
		case <-done:
		case <-n.waiting:
		}
	}
	return done
}

const shoes = "https://shop.test/c/shoes"

var shoesKey = []byte("desktop|" + shoes)

// A DELETE that lands between a result's decision and its commit must stay deleted: before,
// the result's commit brought the row, the target and the page back, after a 200.
func TestDeleteBetweenAResultsDecisionAndCommitStays(t *testing.T) {
	n := newFenceNode(t)
	n.do(http.MethodPost, "/v1/targets", `[{"url": "`+shoes+`", "source": "sitemap"}]`)
	lease := grant(t, n.Env, shoesKey)
	var code int
	done := n.inWindow(func() { code = n.deleteTarget(shoes) })
	if _, err := n.applier.Apply([]wire.Result{{Key: shoesKey, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}}); err != nil {
		t.Fatal(err)
	}
	<-done
	if code != 200 {
		t.Fatalf("delete: %d", code)
	}
	if _, err := n.Store.GetSchedule(shoesKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted row is back: %v", err)
	}
	if _, err := n.Store.GetTarget(shoesKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted target is back: %v", err)
	}
	if _, err := n.Store.GetPage(shoesKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleted page is back: %v", err)
	}
}

// A delete while the render is in flight: the render's result is fenced, and the entry of the
// ready set published before the delete is not granted for the hold (two sweep intervals).
func TestDeleteRevokesTheLeaseAndHoldsTheKey(t *testing.T) {
	n := newFenceNode(t)
	n.do(http.MethodPost, "/v1/targets", `[{"url": "`+shoes+`", "source": "sitemap"}]`)
	lease := grant(t, n.Env, shoesKey)
	if code := n.deleteTarget(shoes); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	st, err := n.applier.Apply([]wire.Result{{Key: shoesKey, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}})
	if err != nil || st.Fenced != 1 {
		t.Fatalf("the in-flight render's result: %+v %v, want fenced", st, err)
	}
	h := shm.KeyHash(shoesKey)
	if _, s := n.Seg.Leases().Acquire(h, n.Now()+20_000-1, 600_000, 9); s != shm.Held {
		t.Fatalf("a stale ready-set entry granted inside the hold: %v", s)
	}
	if _, s := n.Seg.Leases().Acquire(h, n.Now()+20_000, 600_000, 9); s != shm.Acquired {
		t.Fatalf("the key after the hold: %v", s)
	}
}

// A rush while the render is in flight is not undone by that render's result: the urgent
// mark and the due time stay, the result is fenced, and the key is granted again once the
// release grace has passed. The same for wait: the result does not store the page it dropped.
func TestRushAndWaitAfterTheClaimSurviveTheResult(t *testing.T) {
	for _, mode := range []string{"rush", "wait"} {
		t.Run(mode, func(t *testing.T) {
			n := newFenceNode(t)
			n.do(http.MethodPost, "/v1/targets", `[{"url": "`+shoes+`", "source": "sitemap", "due": "2030-01-01T00:00:00Z"}]`)
			lease := grant(t, n.Env, shoesKey)
			if code := n.do(http.MethodPost, "/v1/prioritize", `{"url": "`+shoes+`", "mode": "`+mode+`"}`); code != 200 {
				t.Fatalf("prioritize: %d", code)
			}
			before, _ := n.Store.GetSchedule(shoesKey)
			n.Advance(1000)
			st, err := n.applier.Apply([]wire.Result{{Key: shoesKey, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}})
			if err != nil || st.Fenced != 1 {
				t.Fatalf("the result of the render granted before the %s: %+v %v, want fenced", mode, st, err)
			}
			if row, _ := n.Store.GetSchedule(shoesKey); row != before {
				t.Fatalf("the %s was undone: %+v, was %+v", mode, row, before)
			}
			if mode == "rush" && (!before.Lanes.Urgent || before.DueAtMs != start) {
				t.Fatalf("rushed row %+v", before)
			}
			if _, err := n.Store.GetPage(shoesKey); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the fenced result stored its page: %v", err)
			}
			h := shm.KeyHash(shoesKey)
			if _, s := n.Seg.Leases().Acquire(h, start+5_000, 600_000, 9); s != shm.Acquired {
				t.Fatalf("the %sed key after the release grace: %v", mode, s)
			}
		})
	}
}

// A rush that arrives while a result is between its decision and its commit waits for it, and
// is applied over it: the result (granted before) is applied, then the rush stands.
func TestRushDuringAResultsCommitIsAppliedAfterIt(t *testing.T) {
	n := newFenceNode(t)
	n.do(http.MethodPost, "/v1/targets", `[{"url": "`+shoes+`", "source": "sitemap"}]`)
	lease := grant(t, n.Env, shoesKey)
	var code int
	done := n.inWindow(func() { code = n.do(http.MethodPost, "/v1/prioritize", `{"url": "`+shoes+`", "mode": "rush"}`) })
	st, err := n.applier.Apply([]wire.Result{{Key: shoesKey, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}})
	<-done
	if err != nil || st.Applied != 1 || code != 200 {
		t.Fatalf("result %+v %v, rush %d", st, err, code)
	}
	row, _ := n.Store.GetSchedule(shoesKey)
	if !row.Lanes.Urgent || row.DueAtMs != n.Now() {
		t.Fatalf("the rush after the result did not stand: %+v", row)
	}
}
