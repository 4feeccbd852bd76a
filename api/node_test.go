package api_test

import (
	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/assemble/node"
)

func init() {
	api.ParsePlanOf = node.ParsePlan
	api.IntakeSettingsOf = node.IntakeSettings
	api.ClaimSettingsOf = node.ClaimSettingsOf
	api.SweepSettingsOf = node.SweepSettingsOf
	api.SitemapSettingsOf = node.SitemapRunsSettings
	api.MissesSettingsOf = node.MissesSettings
}
