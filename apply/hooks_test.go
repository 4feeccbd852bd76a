package apply

import (
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/sweep"
)

// A node's narrowings of the configuration (assemble/node), which these tests pass to
// qtest.Settings. assemble/node imports this package, so its own tests may not import it:
// node_test.go, an external test file of the same test binary, sets them, and the tests run
// with exactly the settings a node would give them, not a copy of the narrowing.
var (
	IntakeSettingsOf func(*config.Config, *policy.Policy) intake.Settings
	ClaimSettingsOf  func(*config.Config, *policy.Policy) claim.Settings
	SweepSettingsOf  func(*config.Config, *policy.Policy) sweep.Settings
)

// newApplier is NewApplier(WithTestDefaults(d)), failing tb if d lacks anything else.
func newApplier(tb testing.TB, d ApplierDeps) *Applier {
	tb.Helper()
	a, err := NewApplier(WithTestDefaults(d))
	if err != nil {
		tb.Fatal(err)
	}
	return a
}
