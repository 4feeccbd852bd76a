package misses_test

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/misses"
)

func init() {
	misses.IntakeSettingsOf = node.IntakeSettings
	misses.SettingsOf = node.MissesSettings
}
