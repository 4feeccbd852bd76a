// Package intaketest builds intake's services for the tests of the packages that use them
// (api, serve, fuzz). It is imported by tests only.
package intaketest

import (
	"testing"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/intake"
)

// Targets is intake.NewTargets(d), failing tb if d lacks a dependency.
func Targets(tb testing.TB, d intake.TargetsDeps) *intake.Targets {
	tb.Helper()
	t, err := intake.NewTargets(d)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// Applier is apply.NewApplier(d) for a test that does not name every dependency: a Writer
// left nil is the Store (no sweep to hide writes from), Locks left nil are the test's own,
// Misses left nil is apply.NoMisses and Hosts left nil apply.NoPoliteness (a refusal is a
// failure). It fails tb if d lacks anything else.
func Applier(tb testing.TB, d apply.ApplierDeps) *apply.Applier {
	tb.Helper()
	a, err := apply.NewApplier(apply.WithTestDefaults(d))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
