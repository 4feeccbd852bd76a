package serve_test

import (
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/serve"
)

func init() {
	serve.IntakeSettingsOf = settings.IntakeSettings
	serve.ServeSettingsOf = settings.ServeSettingsOf
	serve.MissesSettingsOf = settings.MissesSettings
}
