// Package intaketest builds intake's services for the tests of the packages that use them
// (api, serve, fuzz). It is imported by tests only.
package intaketest

import (
	"testing"

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
