package api

import (
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
)

// fenceNode is worker 0's writers over one store, wired as worker 0 wires them: one KeyLocks,
// every write through one sweep.Changes.
type fenceNode struct {
	*qtest.Env
	signals *intake.TestSignals
	locks   *intake.KeyLocks
	changes *sweep.Changes
	applier *apply.Applier
	srv     *httptest.Server
	waiting chan struct{} // a lock had to wait
}

const fenceYAML = "routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\nqueue: {release_grace: 5s, ready: {sweep_interval: 10s}}\n"

func newFenceNode(t *testing.T) *fenceNode {
	e := qtest.New(t, fenceYAML, start, shm.Options{})
	n := &fenceNode{Env: e, signals: &intake.TestSignals{}, changes: sweep.NewChanges(), waiting: make(chan struct{}, 8)}
	n.locks = &intake.KeyLocks{Test: n.signals}
	n.signals.LockWait = func() { n.waiting <- struct{}{} }
	writer := n.changes.Wrap(e.Store)
	targets := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: writer, Deleter: writer, Locks: n.locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}
	n.applier = intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Writer: writer, Locks: n.locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Test: n.signals})
	mux := http.NewServeMux()
	targets.Register(mux)
	(&Operate{Targets: targets.Targets}).Register(mux)
	(&Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: writer, Locks: n.locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
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

// inWindow runs op between the applier's reads and its commit (qtest.InWindow).
func (n *fenceNode) inWindow(op func()) chan struct{} {
	return qtest.InWindow(&n.signals.AfterDecide, n.waiting, op)
}

const shoes = "https://shop.test/c/shoes"

var shoesKey = []byte("desktop|" + shoes)
