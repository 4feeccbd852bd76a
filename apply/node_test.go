package apply_test

import (
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/settings"
)

func init() {
	apply.IntakeSettingsOf = settings.IntakeSettings
	apply.ClaimSettingsOf = settings.ClaimSettingsOf
	apply.SweepSettingsOf = settings.SweepSettingsOf
}
