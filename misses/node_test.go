package misses_test

import (
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/misses"
)

func init() {
	misses.IntakeSettingsOf = settings.IntakeSettings
	misses.SettingsOf = settings.MissesSettings
}
