package sitemapruns_test

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/sitemapruns"
)

func init() {
	sitemapruns.IntakeSettingsOf = node.IntakeSettings
	sitemapruns.SettingsOf = node.SitemapRunsSettings
}
