package api

import (
	"context"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/sitemapruns"
	"github.com/freshq/freshq/sweep"
)

// A node's narrowings of the configuration (assemble/settings), which these tests pass to
// qtest.Settings. assemble/settings imports this package, so its own tests may not import it:
// node_test.go, an external test file of the same test binary, sets them, and the tests run
// with exactly the settings a node would give them, not a copy of the narrowing.
var (
	ParsePlanOf       func(context.Context, []byte) (*policy.Policy, error)
	IntakeSettingsOf  func(*config.Config, *policy.Policy) intake.Settings
	ClaimSettingsOf   func(*config.Config, *policy.Policy) claim.Settings
	SweepSettingsOf   func(*config.Config, *policy.Policy) sweep.Settings
	SitemapSettingsOf func(*config.Config, *policy.Policy) sitemapruns.Settings
	MissesSettingsOf  func(*config.Config, *policy.Policy) misses.Settings
)
