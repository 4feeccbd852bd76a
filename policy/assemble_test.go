package policy_test

import (
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/policy"
)

// The package's tests build their policies from YAML through the real narrowing.
func init() { policy.OptionsOf = assemble.PolicyOptions }
