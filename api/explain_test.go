package api

import (
	"encoding/json"
	"errors"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
	"net/http"
	"net/url"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

func getExplain(t *testing.T, base, rawURL, device string) (int, wire.Explanation, wire.ErrorBody) {
	t.Helper()
	q := url.Values{"url": {rawURL}}
	if device != "" {
		q.Set("device", device)
	}
	resp, err := http.Get(base + "/v1/targets?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ex wire.Explanation
	var ae wire.ErrorBody
	if resp.StatusCode == http.StatusOK {
		json.NewDecoder(resp.Body).Decode(&ex)
	} else {
		json.NewDecoder(resp.Body).Decode(&ae)
	}
	return resp.StatusCode, ex, ae
}

func TestExplainAndDelete(t *testing.T) {
	e, srv := targetsServer(t)
	postTargets(t, srv, `[{"url": "https://shop.test/c/shoes", "source": "sitemap", "interval": "6h"}]`)
	key := []byte("desktop|https://shop.test/c/shoes")
	// Render it once (result applied as worker 0 does), then let it fall 3 h late.
	a := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, DurationMs: 80, Body: []byte("<html/>"), Lease: grant(t, e, key)}}); err != nil {
		t.Fatal(err)
	}
	e.Advance(9 * hour)
	lease, _ := e.Seg.Leases().Acquire(shm.KeyHash(key), e.Now(), 600_000, 42)
	code, ex, _ := getExplain(t, srv.URL, "https://SHOP.test/c/shoes", "")
	if code != 200 {
		t.Fatalf("explain: %d", code)
	}
	if ex.Cadence.Seconds != 6*3600 || ex.Cadence.Origin != "row" || ex.Lane != "submitted" || ex.Source != "sitemap" {
		t.Fatalf("explain %+v", ex)
	}
	if ex.DueInSec != -3*3600 || ex.Score != 0.5*2 { // 3 h late on a 6 h cadence, × boost 2
		t.Fatalf("due in %v s, score %v", ex.DueInSec, ex.Score)
	}
	if ex.Lease == nil || ex.Lease.Holder != 42 || ex.Lease.Released {
		t.Fatalf("lease %+v", ex.Lease)
	}
	if ex.LastRender == nil || ex.LastRender.Status != 200 || ex.Page == nil || ex.Page.AgeSec != 9*3600 ||
		ex.Page.AgeOverCadence != 1.5 || !ex.Page.Servable {
		t.Fatalf("render %+v page %+v", ex.LastRender, ex.Page)
	}
	e.Seg.Leases().Release(lease, e.Now(), 0)
	if code, _, ae := getExplain(t, srv.URL, "https://shop.test/nope", ""); code != 404 || ae.Field != "url" {
		t.Fatalf("unknown target: %d %+v", code, ae)
	}
	if code, _, ae := getExplain(t, srv.URL, "mailto:x", ""); code != 400 || ae.Field != "url" {
		t.Fatalf("bad url: %d %+v", code, ae)
	}
	if code, _, ae := getExplain(t, srv.URL, "https://shop.test/c/shoes", "fridge"); code != 400 || ae.Field != "device" {
		t.Fatalf("bad device: %d %+v", code, ae)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1/targets?url="+url.QueryEscape("https://shop.test/c/shoes"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	for _, get := range []func([]byte) error{
		func(k []byte) error { _, err := e.Store.GetSchedule(k); return err },
		func(k []byte) error { _, err := e.Store.GetTarget(k); return err },
		func(k []byte) error { _, err := e.Store.GetPage(k); return err },
	} {
		if err := get(key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	}
	if rep, err := e.Store.VerifyIndex(); err != nil {
		t.Fatalf("index after delete: %v %+v", err, rep)
	}
}
