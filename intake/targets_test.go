package intake

import (
	"context"
	"errors"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

func newTargets(t *testing.T) (*qtest.Env, *Targets) {
	e := qtest.New(t, "", start, shm.Options{})
	return e, mustTargets(t, TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
}

// What names nothing stored is ErrNotFound, in a FieldError naming the field that named it.
func TestTargetsNotFoundNamesTheField(t *testing.T) {
	_, svc := newTargets(t)
	var fe *FieldError
	_, err := svc.Prioritize(wire.PrioritizeRequest{Prefix: "https://a.test/none/", Mode: "wait"})
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &fe) || fe.Field != "prefix" {
		t.Fatalf("prioritize a prefix matching nothing: %v", err)
	}
	_, err = svc.Prioritize(wire.PrioritizeRequest{URL: "https://a.test/none", Mode: "rush"})
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &fe) || fe.Field != "url" {
		t.Fatalf("prioritize an unknown url: %v", err)
	}
	err = svc.Delete([]byte("desktop|https://a.test/none"))
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &fe) || fe.Field != "url" || err.Error() != "no such target" {
		t.Fatalf("delete an unknown target: %v", err)
	}
}

// A request's bad value is a FieldError naming it; the device is checked before the url.
func TestPrioritizeBadValuesNameTheirField(t *testing.T) {
	_, svc := newTargets(t)
	for _, tc := range []struct {
		req   wire.PrioritizeRequest
		field string
	}{
		{wire.PrioritizeRequest{URL: "https://a.test/", Mode: "now"}, "mode"},
		{wire.PrioritizeRequest{Mode: "rush"}, "url"},
		{wire.PrioritizeRequest{URL: "https://a.test/", Prefix: "https://a.test/", Mode: "rush"}, "url"},
		{wire.PrioritizeRequest{URL: "::", Device: "tv", Mode: "rush"}, "device"},
		{wire.PrioritizeRequest{URL: "::", Mode: "rush"}, "url"},
		{wire.PrioritizeRequest{Prefix: "::", Mode: "rush"}, "prefix"},
	} {
		var fe *FieldError
		if _, err := svc.Prioritize(tc.req); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: %v, want a FieldError naming %s", tc.req, err, tc.field)
		}
	}
}

// A commit the store refuses is a StoreError: it matches ErrStore, names the store once, and
// nothing of the chunk landed.
func TestUpsertStoreFailureIsErrStore(t *testing.T) {
	e, svc := newTargets(t)
	svc.w = writerFunc(func([]store.Write) error { return errors.New("store: commit: disk full") })
	p, err := ParseItem(&wire.TargetItem{URL: "https://a.test/c/1"}, KeyingOf(svc.Settings()))
	if err != nil {
		t.Fatal(err)
	}
	n, err := svc.Upsert([]Item{p}, func(int, string, string) { t.Fatal("rejected") })
	if n != 0 || !errors.Is(err, ErrStore) || err.Error() != "store: commit: disk full" {
		t.Fatalf("upsert on a failing store: %d %v", n, err)
	}
	if _, err := e.Store.GetSchedule(p.Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the failed chunk's row: %v", err)
	}
}

// Once its gate is shut, a run's chunk is refused with ErrClosed and writes nothing.
func TestUpsertChunkAfterShutIsErrClosed(t *testing.T) {
	_, svc := newTargets(t)
	var gate Gate
	p, _ := ParseItem(&wire.TargetItem{URL: "https://a.test/c/1", Source: "sitemap"}, KeyingOf(svc.Settings()))
	landed, err := svc.UpsertChunk(context.Background(), &gate, []Item{p})
	if err != nil || len(landed) != 1 || landed[0].Existed || landed[0].Failed != "" {
		t.Fatalf("before shut: %+v %v", landed, err)
	}
	if landed, err := svc.UpsertChunk(context.Background(), &gate, []Item{p}); err != nil || !landed[0].Existed {
		t.Fatalf("again: %+v %v, want it updated", landed, err)
	}
	gate.Shut()
	if _, err := svc.UpsertChunk(context.Background(), &gate, []Item{p}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after shut: %v", err)
	}
}
