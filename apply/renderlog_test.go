package apply

import (
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

type recordedRender struct {
	outcome, verdict string
	changed          bool
}

type renderRecorder struct {
	mu  sync.Mutex
	got []recordedRender
}

func (r *renderRecorder) Applied(res *wire.Result, changed bool, verdict string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, recordedRender{outcome: res.Outcome, verdict: verdict, changed: changed})
}

// Every result the Applier applies is told to its render log after the commit, with what only
// the Applier knows of it: whether the content changed since the last render, and its verdict.
// The console's page history shows both.
func TestAppliedRendersAreLoggedWithChangeAndVerdict(t *testing.T) {
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/p/1")
	e.Put(string(key), start-hour, true, 0, store.Lanes{NeverRendered: true})
	rec := &renderRecorder{}
	set := qtest.Settings(e, IntakeSettingsOf)
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: set, Now: e.Now,
		Suspects: NewSuspects(), Log: zerolog.Nop(), Renders: rec})
	apply := func(body string, sig *wire.Signals) {
		t.Helper()
		r := wire.Result{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Signals: sig,
			Headers: map[string]string{"content-type": "text/html"}, Lease: grant(t, e, key)}
		if st, err := a.Apply([]wire.Result{r}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		e.Advance(set().ReleaseGrace.Milliseconds() + 1)
	}
	apply(goodBody, nil)
	apply(goodBody, nil)
	apply(strings.Replace(goodBody, "A fine shoe.", "A finer shoe.", 1), nil)
	apply(suspectBody, thrown)
	want := []recordedRender{
		{"ok", "good", false}, // the first render: nothing to compare with
		{"ok", "good", false},
		{"ok", "good", true},
		{"ok", "exception,text_collapsed,lost_h1", false}, // not applied: nothing observed
	}
	if len(rec.got) != len(want) {
		t.Fatalf("logged %+v, want %+v", rec.got, want)
	}
	for i := range want {
		if rec.got[i] != want[i] {
			t.Errorf("render %d logged %+v, want %+v", i, rec.got[i], want[i])
		}
	}
}
