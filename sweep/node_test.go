package sweep_test

import (
	"github.com/freshq/freshq/assemble/node"
	"github.com/freshq/freshq/sweep"
)

func init() {
	sweep.SweepSettingsOf = node.SweepSettingsOf
}
