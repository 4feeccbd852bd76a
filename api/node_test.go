package api_test

import (
	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/assemble/settings"
)

func init() {
	api.ParsePlanOf = settings.ParsePlan
	api.IntakeSettingsOf = settings.IntakeSettings
	api.ClaimSettingsOf = settings.ClaimSettingsOf
	api.SweepSettingsOf = settings.SweepSettingsOf
	api.SitemapSettingsOf = settings.SitemapRunsSettings
	api.MissesSettingsOf = settings.MissesSettings
}
