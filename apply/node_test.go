package apply_test

import (
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/node"
)

func init() {
	apply.IntakeSettingsOf = node.IntakeSettings
	apply.ClaimSettingsOf = node.ClaimSettingsOf
	apply.SweepSettingsOf = node.SweepSettingsOf
}
