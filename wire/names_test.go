package wire_test

import (
	"slices"
	"testing"

	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/wire"
)

// The stage names the results decoder interns are exactly render's: a new stage must be added
// to both, or decoding it would allocate. (Outcome names come from the leaf package outcome.)
func TestNamesAreRenders(t *testing.T) {
	stages := []string{render.StagePolicy, render.StageDial, render.StageRequest, render.StageHeaders, render.StageBody, render.StageExec}
	if !slices.Equal(stages, wire.StageNames) {
		t.Fatalf("wire.StageNames = %q, render's stages are %q", wire.StageNames, stages)
	}
}
