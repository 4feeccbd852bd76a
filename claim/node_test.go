package claim_test

import (
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/claim"
)

func init() {
	claim.ClaimSettingsOf = settings.ClaimSettingsOf
	claim.SweepSettingsOf = settings.SweepSettingsOf
}
