package serve

import (
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/misses"
	"github.com/freshq/freshq/policy"
)

// A node's narrowings of the configuration (assemble/settings), which these tests pass to
// qtest.Settings. assemble/settings imports this package, so its own tests may not import it:
// node_test.go, an external test file of the same test binary, sets them, and the tests run
// with exactly the settings a node would give them, not a copy of the narrowing.
var (
	IntakeSettingsOf func(*config.Config, *policy.Policy) intake.Settings
	ServeSettingsOf  func(*config.Config, *policy.Policy) Settings
	MissesSettingsOf func(*config.Config, *policy.Policy) misses.Settings
)
