package sitemapruns

import (
	"errors"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// start is the tests' clock at their start, in Unix milliseconds.
const start = int64(1_800_000_000_000)

// A node's narrowings of the configuration (assemble/node), which these tests pass to
// qtest.Settings. assemble/node imports this package, so its own tests may not import it:
// node_test.go, an external test file of the same test binary, sets them, and the tests run
// with exactly the settings a node would give them, not a copy of the narrowing.
var (
	IntakeSettingsOf func(*config.Config, *policy.Policy) intake.Settings
	SettingsOf       func(*config.Config, *policy.Policy) Settings
)

// writerFunc is a Writer of a test whose batched puts are f; it has no Modify.
type writerFunc func([]store.Write) error

func (f writerFunc) WriteSchedules(ws []store.Write) error { return f(ws) }
func (f writerFunc) Modify([]store.Change) ([]bool, error) {
	return nil, errors.New("writerFunc has no Modify")
}
