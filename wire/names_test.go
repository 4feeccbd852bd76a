package wire_test

import (
	"slices"
	"testing"

	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/wire"
)

// The names the results decoder interns are exactly render's: a new outcome or stage must be
// added to both, or Validate would refuse it (outcomes) or decoding it would allocate (stages).
func TestNamesAreRenders(t *testing.T) {
	var outcomes []string
	for _, o := range render.Outcomes() {
		outcomes = append(outcomes, o.String())
	}
	if !slices.Equal(outcomes, wire.OutcomeNames) {
		t.Fatalf("wire.OutcomeNames = %q, render's outcomes are %q", wire.OutcomeNames, outcomes)
	}
	stages := []string{render.StagePolicy, render.StageDial, render.StageRequest, render.StageHeaders, render.StageBody, render.StageExec}
	if !slices.Equal(stages, wire.StageNames) {
		t.Fatalf("wire.StageNames = %q, render's stages are %q", wire.StageNames, stages)
	}
}
