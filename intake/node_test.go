package intake_test

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/intake"
)

func init() {
	intake.IntakeSettingsOf = node.IntakeSettings
	intake.ClaimSettingsOf = node.ClaimSettingsOf
	intake.SweepSettingsOf = node.SweepSettingsOf
}
