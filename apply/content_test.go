package apply

import (
	"math"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// Each applied render is one observation of its page's change estimator: a render whose body
// differs only in what changes on every load (a nonce, a timestamp) is unchanged, one whose
// content differs is changed, each over the interval since the previous render; the route's
// strip patterns count too, and the origin's validators are kept (a malformed one is not).
func TestApplyObservesContentChange(t *testing.T) {
	e := qtest.New(t, `
routes:
  - {name: news, match: prefix, path: /news/, strip: ['<i class="views">[0-9]+</i>']}
`, start, shm.Options{})
	key := []byte("desktop|https://a.test/news/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	render := func(body, etag string) store.Freshness {
		t.Helper()
		r := wire.Result{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Lease: grant(t, e, key),
			Headers: map[string]string{"etag": etag, "last-modified": "Tue, 01 Dec 2026 10:00:00 GMT"}}
		if st, err := a.Apply([]wire.Result{r}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		tg, err := e.Store.GetTarget(key)
		if err != nil {
			t.Fatal(err)
		}
		e.Advance(1_000) // past the release grace
		return tg.Fresh
	}
	page := func(price, nonce, at, views string) string {
		return `<script nonce="` + nonce + `"></script><p>` + price + `</p><i class="views">` + views + `</i><time>` + at + `</time>`
	}
	f := render(page("10", "a", "2026-12-02T09:00:00Z", "1"), `"v1"`)
	if f.Digest == 0 || f.DigestAtMs != e.Now()-1_000 || f.Changed != 0 || f.UnchangedHours != 0 || f.ETag != `"v1"` || f.LastModified == "" {
		t.Fatalf("first render: %+v (no observation yet, a digest and the validators)", f)
	}
	first := f.Digest
	e.Advance(2*hour - 1_000)
	f = render(page("10", "b", "2026-12-02T11:00:00Z", "7"), `"v2"`)
	if f.Digest != first || f.Changed != 0 || math.Abs(f.UnchangedHours-2) > 1e-9 || f.ETag != `"v2"` {
		t.Fatalf("second render, same content: %+v, want unchanged over 2 h", f)
	}
	e.Advance(hour - 1_000)
	f = render(page("12", "b", "2026-12-02T11:00:00Z", "7"), "bad\nvalue"+strings.Repeat("x", 10))
	if f.Digest == first || f.Changed != 1 || math.Abs(f.ChangedHours-1) > 1e-9 || math.Abs(f.UnchangedHours-2) > 1e-9 || f.ETag != "" {
		t.Fatalf("third render, changed content: %+v, want changed over 1 h and no malformed etag", f)
	}
}

// A failed render observes nothing and keeps the state.
func TestApplyFailureKeepsContentState(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/p")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("x"), Lease: grant(t, e, key)}}); err != nil {
		t.Fatal(err)
	}
	before, _ := e.Store.GetTarget(key)
	e.Advance(hour)
	if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "timeout", Lease: grant(t, e, key)}}); err != nil {
		t.Fatal(err)
	}
	after, _ := e.Store.GetTarget(key)
	if after.Fresh != before.Fresh || before.Fresh.Digest == 0 {
		t.Fatalf("a timeout changed the content state: %+v → %+v", before.Fresh, after.Fresh)
	}
}

// GET /v1/targets explains what was observed and the parts of the freshness decision.
func TestExplainFreshness(t *testing.T) {
	e := qtest.New(t, `
queue: {policy: freshness}
routes: [{name: p, match: prefix, path: /p/, interval: 24h, change_interval: 2h, requests: 6}]
`, start, shm.Options{})
	key := []byte("desktop|https://a.test/p/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	for _, body := range []string{"a", "b", "b"} {
		if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Lease: grant(t, e, key),
			Headers: map[string]string{"etag": `"x"`}}}); err != nil {
			t.Fatal(err)
		}
		e.Advance(hour)
	}
	ex, err := (mustTargets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})).Explain(key)
	if err != nil || ex.Freshness == nil {
		t.Fatalf("explain: %+v %v", ex, err)
	}
	f := ex.Freshness
	if f.Policy != "freshness" || f.Changed != 1 || f.ChangedHours != 1 || f.UnchangedHours != 1 || f.ETag != `"x"` {
		t.Fatalf("observed: %+v", f)
	}
	if f.ChangesPerHour <= 0 || math.Abs(f.ChangeIntervalSec*f.ChangesPerHour-3600) > 1e-6 || f.RequestsPerHour != 6 || !f.RequestsPrior {
		t.Fatalf("estimates: %+v", f)
	}
	if f.SinceSec != 3600 || f.ExpectedStale <= 0 || f.Marginal <= 0 || f.Threshold != 1 || f.IntervalSec <= 0 || f.IntervalSec > 24*3600 {
		t.Fatalf("score parts: %+v", f)
	}
}
