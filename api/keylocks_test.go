package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/qtest"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// An operator's upsert that lands while a render result for the same target is being applied
// must not be lost: the result's write must not carry the state it read before the upsert.
// The upsert is started between the applier's reads and its commit; the test then waits until
// the upsert has either committed (the race happened) or is waiting for the key (it is
// serialised behind the result), which involves no timing.
func TestResultDoesNotOverwriteAConcurrentUpsert(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	locks := &intake.KeyLocks{}
	waiting := make(chan struct{}, 8)
	locks.TestOnWait = func() { waiting <- struct{}{} }
	targets := &Targets{Store: e.Store, Writer: e.Store, Locks: locks, Policy: e.Policy, Now: e.Now}
	mux := http.NewServeMux()
	targets.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(body string) {
		resp, err := http.Post(srv.URL+"/v1/targets", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}
	post(`[{"url": "https://shop.test/c/x", "interval": "12h", "source": "sitemap"}]`)
	key := []byte("desktop|https://shop.test/c/x")

	upserted := make(chan struct{})
	a := &intake.Applier{Store: e.Store, Seg: e.Seg, Locks: locks, Policy: e.Policy, Now: e.Now}
	a.TestAfterDecide = func() {
		go func() {
			post(`[{"url": "https://shop.test/c/x", "interval": "2h", "source": "sitemap"}]`)
			close(upserted)
		}()
		select {
		case <-upserted: // committed inside the result's read-to-write window: the race
		case <-waiting: // serialised behind the result
		}
	}
	lease := grant(t, e, key)
	if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("<html/>"), Lease: lease}}); err != nil {
		t.Fatal(err)
	}
	<-upserted
	row, err := e.Store.GetSchedule(key)
	if err != nil {
		t.Fatal(err)
	}
	tgt, _ := e.Store.GetTarget(key)
	if row.EffectiveIntervalMs != 2*hour || tgt.StoredIntervalMs != 2*hour {
		t.Fatalf("the operator's 2h interval was lost: row carries %v ms, target stores %v ms", row.EffectiveIntervalMs, tgt.StoredIntervalMs)
	}
	if tgt.LastRender.Status != 200 {
		t.Fatalf("the result was lost: %+v", tgt.LastRender)
	}
}
