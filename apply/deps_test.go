package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// NewApplier refuses deps without any of the dependencies that carry a guarantee, naming it;
// "off" is a named value (NoMisses, NoPoliteness), never a nil.
func TestNewApplierRefusesAMissingDependency(t *testing.T) {
	e := qtest.New(t, "", 1_000_000, shm.Options{})
	full := ApplierDeps{Store: e.Store, Writer: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf),
		Now: e.Now, Misses: NoMisses, Hosts: NoPoliteness}
	if _, err := NewApplier(full); err != nil {
		t.Fatalf("every dependency given: %v", err)
	}
	for name, drop := range map[string]func(*ApplierDeps){
		"Store": func(d *ApplierDeps) { d.Store = nil }, "Writer": func(d *ApplierDeps) { d.Writer = nil },
		"Locks": func(d *ApplierDeps) { d.Locks = nil }, "Seg": func(d *ApplierDeps) { d.Seg = nil },
		"Settings": func(d *ApplierDeps) { d.Settings = nil }, "Now": func(d *ApplierDeps) { d.Now = nil },
		"Misses": func(d *ApplierDeps) { d.Misses = nil }, "Hosts": func(d *ApplierDeps) { d.Hosts = nil },
	} {
		d := full
		drop(&d)
		got, err := NewApplier(d)
		if !errors.Is(err, intake.ErrMissingDependency) || !strings.Contains(err.Error(), name) || got != nil {
			t.Errorf("without %s: %v, %v; want intake.ErrMissingDependency naming it", name, got, err)
		}
	}
}

// mustTargets is intake.NewTargets(d), failing tb if d lacks a dependency.
func mustTargets(tb testing.TB, d intake.TargetsDeps) *intake.Targets {
	tb.Helper()
	t, err := intake.NewTargets(d)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// mustDemand is intake.NewDemand(d), failing tb if d lacks a dependency.
func mustDemand(tb testing.TB, d intake.DemandDeps) *intake.Demand {
	tb.Helper()
	dm, err := intake.NewDemand(d)
	if err != nil {
		tb.Fatal(err)
	}
	return dm
}

// upsert files items through svc as POST /v1/targets does, failing t on a rejected item.
func upsert(t *testing.T, svc *intake.Targets, items ...wire.TargetItem) int {
	t.Helper()
	chunk := make([]intake.Item, len(items))
	for i := range items {
		p, err := intake.ParseItem(&items[i], intake.KeyingOf(svc.Settings()))
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		p.Index, chunk[i] = i, p
	}
	n, err := svc.Upsert(chunk, func(i int, field, msg string) { t.Errorf("item %d rejected: %s %s", i, field, msg) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}
