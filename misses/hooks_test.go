package misses

import (
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// The tests' clock at their start, in Unix milliseconds, and an hour of it.
const (
	start = int64(1_800_000_000_000)
	hour  = qtest.Hour
)

// A node's narrowings of the configuration (assemble/node), which these tests pass to
// qtest.Settings. assemble/node imports this package, so its own tests may not import it:
// node_test.go, an external test file of the same test binary, sets them, and the tests run
// with exactly the settings a node would give them, not a copy of the narrowing.
var (
	IntakeSettingsOf func(*config.Config, *policy.Policy) intake.Settings
	SettingsOf       func(*config.Config, *policy.Policy) Settings
)

// grant grants key as a render worker's claim would, and returns its lease as a result carries it.
func grant(t testing.TB, e *qtest.Env, key []byte) wire.Lease {
	t.Helper()
	return intake.WireLease(e.Grant(key))
}
