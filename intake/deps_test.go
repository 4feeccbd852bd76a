package intake

import (
	"errors"
	"strings"
	"testing"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
)

// mustTargets is NewTargets(d), failing tb if d lacks a dependency.
func mustTargets(tb testing.TB, d TargetsDeps) *Targets {
	tb.Helper()
	t, err := NewTargets(d)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// Every dependency of Targets carries a guarantee (its doc says which), so a service built
// without one is refused, naming it, rather than running without the guarantee.
func TestNewTargetsRefusesAMissingDependency(t *testing.T) {
	e := qtest.New(t, "", 1_000_000, shm.Options{})
	full := TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}
	if _, err := NewTargets(full); err != nil {
		t.Fatalf("every dependency given: %v", err)
	}
	for name, drop := range map[string]func(*TargetsDeps){
		"Store": func(d *TargetsDeps) { d.Store = nil }, "Writer": func(d *TargetsDeps) { d.Writer = nil },
		"Deleter": func(d *TargetsDeps) { d.Deleter = nil }, "Locks": func(d *TargetsDeps) { d.Locks = nil },
		"Seg": func(d *TargetsDeps) { d.Seg = nil }, "Settings": func(d *TargetsDeps) { d.Settings = nil },
		"Now": func(d *TargetsDeps) { d.Now = nil },
	} {
		d := full
		drop(&d)
		got, err := NewTargets(d)
		if !errors.Is(err, ErrMissingDependency) || !strings.Contains(err.Error(), name) || got != nil {
			t.Errorf("without %s: %v, %v; want ErrMissingDependency naming it", name, got, err)
		}
	}
}

// mustDemand is NewDemand(d), failing tb if d lacks a dependency.
func mustDemand(tb testing.TB, d DemandDeps) *Demand {
	tb.Helper()
	dm, err := NewDemand(d)
	if err != nil {
		tb.Fatal(err)
	}
	return dm
}

// NewDemand refuses deps without any of the dependencies that carry a guarantee, naming it:
// without its Writer a flush would bypass the sweep's wrapper, without its Locks it could land
// between a result's decision and its commit.
func TestNewDemandRefusesAMissingDependency(t *testing.T) {
	e := qtest.New(t, "", 1_000_000, shm.Options{})
	full := DemandDeps{Store: e.Store, Writer: e.Store, Locks: &KeyLocks{}, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}
	if _, err := NewDemand(full); err != nil {
		t.Fatalf("every dependency given: %v", err)
	}
	for name, drop := range map[string]func(*DemandDeps){
		"Store": func(d *DemandDeps) { d.Store = nil }, "Writer": func(d *DemandDeps) { d.Writer = nil },
		"Locks": func(d *DemandDeps) { d.Locks = nil }, "Settings": func(d *DemandDeps) { d.Settings = nil },
		"Now": func(d *DemandDeps) { d.Now = nil },
	} {
		d := full
		drop(&d)
		got, err := NewDemand(d)
		if !errors.Is(err, ErrMissingDependency) || !strings.Contains(err.Error(), name) || got != nil {
			t.Errorf("without %s: %v, %v; want ErrMissingDependency naming it", name, got, err)
		}
	}
}
