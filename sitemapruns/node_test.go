package sitemapruns_test

import (
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/sitemapruns"
)

func init() {
	sitemapruns.IntakeSettingsOf = settings.IntakeSettings
	sitemapruns.SettingsOf = settings.SitemapRunsSettings
}
