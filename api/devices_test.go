package api

import (
	"context"
	"encoding/json"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/testkit/intaketest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// devicesYAML defines a device of its own under render.devices (and none under
// render.user_agents): the chrome renderer can render it, so every endpoint must take it.
const devicesYAML = `render:
  domains: ["shop.test"]
  devices:
    tablet: {width: 800, height: 1280, scale: 2, mobile: true}
`

// A device defined under render.devices is a device everywhere one enters through the API, and
// a name the configuration in force does not define is a 400 naming "device" everywhere.
func TestConfiguredDevicesAreAcceptedEverywhere(t *testing.T) {
	e := qtest.New(t, devicesYAML, start, shm.Options{})
	locks := &intake.KeyLocks{}
	targets := &Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}
	applier := intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Seg: e.Seg, Locks: locks, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	index := &claim.IndexSource{Scanner: e.Store, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}
	mux := http.NewServeMux()
	targets.Register(mux)
	(&Operate{Targets: targets.Targets}).Register(mux)
	(&Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})}).Register(mux)
	newSitemaps(t, e, targets, nil).Register(mux)
	(&Remote{Applier: applier, Claimer: qtest.Must(claim.New(claim.Options{Segment: e.Seg, Worker: e.Worker0, Fallback: index,
		Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now, Holder: 0xffff}))(t)}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	call := func(method, path, contentType, body string) (int, map[string]any, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return resp.StatusCode, out, string(raw)
	}
	const page = "https://shop.test/c/a"
	q := func(u, device string) string {
		return "?url=" + url.QueryEscape(u) + "&device=" + url.QueryEscape(device)
	}
	// Every way a device enters, with the configured device and with one nobody defined.
	type entry struct {
		name, method, path, contentType, body string
		ok                                    int
	}
	entries := func(device string) []entry {
		return []entry{
			{"targets", "POST", "/v1/targets", "application/json", `[{"url": "` + page + `", "device": "` + device + `", "source": "sitemap"}]`, 200},
			{"discover", "POST", "/v1/discover", "application/json", `{"url": "https://shop.test/c/new", "device": "` + device + `"}`, 201},
			{"explain", "GET", "/v1/targets" + q(page, device), "", "", 200},
			{"prioritize", "POST", "/v1/prioritize", "application/json", `{"url": "` + page + `", "device": "` + device + `", "mode": "rush"}`, 200},
			{"sitemap", "POST", "/v1/sitemaps?device=" + url.QueryEscape(device), "application/xml",
				`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://shop.test/s/1</loc></url></urlset>`, 202},
		}
	}
	for _, en := range entries("tablet") {
		if code, out, raw := call(en.method, en.path, en.contentType, en.body); code != en.ok {
			t.Errorf("%s with the configured device tablet: %d %v %s, want %d", en.name, code, out, raw, en.ok)
		}
	}
	for _, en := range append(entries("fridge"),
		entry{"pages", "GET", "/v1/pages" + q(page, "fridge"), "", "", 0},
		entry{"delete", "DELETE", "/v1/targets" + q(page, "fridge"), "", "", 0}) {
		code, out, raw := call(en.method, en.path, en.contentType, en.body)
		if en.name == "targets" { // a bulk upsert rejects the item by its field
			if code != 400 || !strings.Contains(raw, `"field":"device"`) {
				t.Errorf("targets with the unknown device fridge: %d %s, want 400 naming device", code, raw)
			}
			continue
		}
		if code != 400 || out["field"] != "device" || !strings.Contains(out["error"].(string), "fridge") {
			t.Errorf("%s with the unknown device fridge: %d %s, want 400 naming the field device", en.name, code, raw)
		}
	}

	// A remote renderer is told the device of the job it claims, and its result is applied.
	sweeper := qtest.Must(sweep.New(sweep.Options{Changes: sweep.NewChanges(), Store: sweep.FromStore(e.Store, nil), Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil)}))(t)
	sweeper.Sweep(context.Background())
	code, out, raw := call("POST", "/v1/claim", "application/json", `{"limit": 10, "lease": "5m", "renderer": "farm"}`)
	if code != 200 {
		t.Fatalf("claim: %d %s", code, raw)
	}
	var claimed struct{ Jobs []wire.RemoteJob }
	_ = json.Unmarshal([]byte(raw), &claimed)
	var results []wire.Result
	for _, j := range claimed.Jobs {
		if j.URL == page && j.Device == "tablet" {
			results = append(results, wire.Result{Key: j.Key, Outcome: "ok", Status: 200, Body: []byte("<html>tablet</html>"), Lease: j.Lease})
		}
	}
	if len(results) != 1 {
		t.Fatalf("no tablet job for %s among %v", page, out)
	}
	body, _ := json.Marshal(wire.ResultsRequest{Results: results})
	if code, _, raw := call("POST", "/v1/results", "application/json", string(body)); code != 200 || !strings.Contains(raw, `"applied":1`) {
		t.Fatalf("results of a tablet job: %d %s", code, raw)
	}
	if code, _, raw := call("GET", "/v1/pages"+q(page, "tablet"), "", ""); code != 200 || raw != "<html>tablet</html>" {
		t.Fatalf("the tablet page: %d %q", code, raw)
	}
	if code, _, raw := call("DELETE", "/v1/targets"+q(page, "tablet"), "", ""); code != 200 {
		t.Fatalf("delete of the tablet target: %d %s", code, raw)
	}

	// The set is the configuration in force: a reload that drops the device refuses it.
	e.Reload("render: {domains: [\"shop.test\"]}\n")
	if code, out, raw := call("POST", "/v1/discover", "application/json", `{"url": "https://shop.test/c/later", "device": "tablet"}`); code != 400 || out["field"] != "device" {
		t.Fatalf("discover after the reload dropped tablet: %d %s", code, raw)
	}
}
