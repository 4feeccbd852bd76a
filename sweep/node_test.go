package sweep_test

import (
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/sweep"
)

func init() {
	sweep.SweepSettingsOf = settings.SweepSettingsOf
}
