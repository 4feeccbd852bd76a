package intake_test

import (
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/intake"
)

func init() {
	intake.IntakeSettingsOf = settings.IntakeSettings
	intake.ClaimSettingsOf = settings.ClaimSettingsOf
	intake.SweepSettingsOf = settings.SweepSettingsOf
}
