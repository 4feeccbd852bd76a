package serve_test

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/serve"
)

func init() {
	serve.IntakeSettingsOf = node.IntakeSettings
	serve.ServeSettingsOf = node.ServeSettingsOf
	serve.MissesSettingsOf = node.MissesSettings
}
