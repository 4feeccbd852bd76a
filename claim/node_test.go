package claim_test

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/claim"
)

func init() {
	claim.ClaimSettingsOf = node.ClaimSettingsOf
	claim.SweepSettingsOf = node.SweepSettingsOf
}
