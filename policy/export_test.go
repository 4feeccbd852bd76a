package policy

import (
	"testing"

	"github.com/freshq/freshq/config"
)

// OptionsOf narrows a configuration to policy's options as a node does: it is
// assemble.PolicyOptions, set by assemble_test.go (an external test file, which may import
// assemble where this package's own tests may not), so these tests compile a script's YAML
// exactly as production does, without a copy of the narrowing.
var OptionsOf func(*config.Config) (Options, error)

// newFromConfig is New of OptionsOf(c).
func newFromConfig(t testing.TB, c *config.Config) *Policy {
	t.Helper()
	o, err := OptionsOf(c)
	if err != nil {
		t.Fatal(err)
	}
	return New(o)
}
