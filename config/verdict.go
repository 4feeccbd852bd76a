package config

import (
	"cmp"
	"time"

	"github.com/freshq/freshq/verdict"
)

// Verdict configures how a completed render is judged before it is applied (package verdict,
// docs/RENDERING.md "Render verdicts"): a suspect render never replaces a good page.
type Verdict struct {
	// CollapseRatio: a render whose visible text is under this fraction of the last good
	// render's has collapsed (VerdictCollapseRatioDefault, VerdictCollapseRatioMin..1).
	CollapseRatio float64 `yaml:"collapse_ratio"`
	// MinText is the bytes of visible text below which a last good render is not compared for
	// a collapse: a page of a few words has nothing to lose (VerdictMinTextDefault).
	MinText int `yaml:"min_text"`
	// Agree and AgreeSpan: Agree suspect renders of a page with the same content, the first
	// and the last at least AgreeSpan apart, are taken as the site's real change and applied
	// (VerdictAgreeDefault, 1..VerdictAgreeMax; VerdictAgreeSpanDefault).
	Agree     int      `yaml:"agree"`
	AgreeSpan Duration `yaml:"agree_span"`
	// KeepBytes bounds the bytes of suspect bodies worker 0 keeps for inspection by hand
	// (VerdictKeepBytesDefault, VerdictKeepBytesMin..VerdictKeepBytesMax).
	KeepBytes ByteSize `yaml:"keep_bytes"`
}

// RouteExpect is routes[].expect: what every good page of the route has, a CSS selector, a
// text of its visible text (case-sensitive, whitespace runs as one space), or both. A render
// without it is suspect. verdict.CompileExpect says which selectors are accepted and what a
// selector costs.
type RouteExpect struct {
	Selector string `yaml:"selector"`
	Text     string `yaml:"text"`
}

// Compile is the route's verdict.Expect; nil when it expects nothing. A validated
// configuration's expects always compile.
func (e RouteExpect) Compile() (*verdict.Expect, error) {
	return verdict.CompileExpect(e.Selector, e.Text)
}

// Settings are the verdict section as package verdict takes it.
func (v Verdict) Settings() verdict.Settings {
	return verdict.Settings{
		CollapseRatio: v.CollapseRatio,
		MinText:       uint32(min(max(v.MinText, 0), VerdictMinTextMax)),
		Agree:         v.Agree,
		AgreeSpan:     v.AgreeSpan.D(),
	}
}

// The verdict section's defaults and bounds (verdict.*).
const (
	// A render with under a third of the last good one's text has lost the page: an error
	// state or a shell keeps its header and footer, a tenth of a product page or less, while a
	// page that really shrank (fewer reviews, a shorter list) keeps far more than a third.
	VerdictCollapseRatioDefault = 0.33
	VerdictCollapseRatioMin     = 0.01
	// 200 bytes is a sentence or two: under it there is no text to lose.
	VerdictMinTextDefault = 200
	VerdictMinTextMax     = 1 << 20
	// Three renders with the same content over half an hour are not one failure repeated by
	// chance: the site changed.
	VerdictAgreeDefault     = 3
	VerdictAgreeMax         = 100
	VerdictAgreeSpanDefault = Duration(30 * time.Minute)
	VerdictKeepBytesDefault = ByteSize(32 << 20) // one of the largest bodies a render may have
	VerdictKeepBytesMin     = ByteSize(1 << 20)
	VerdictKeepBytesMax     = ByteSize(16 << 30)
)

func (v *Verdict) ensureDefaults() {
	v.CollapseRatio = cmp.Or(v.CollapseRatio, VerdictCollapseRatioDefault)
	v.MinText = cmp.Or(v.MinText, VerdictMinTextDefault)
	v.Agree = cmp.Or(v.Agree, VerdictAgreeDefault)
	v.AgreeSpan = cmp.Or(v.AgreeSpan, VerdictAgreeSpanDefault)
	v.KeepBytes = cmp.Or(v.KeepBytes, VerdictKeepBytesDefault)
}

func (v *Verdict) validate(bad badFunc) {
	if !(v.CollapseRatio >= VerdictCollapseRatioMin && v.CollapseRatio <= 1) {
		bad("verdict.collapse_ratio", "must be %v..1, got %v", VerdictCollapseRatioMin, v.CollapseRatio)
	}
	if v.MinText < 1 || v.MinText > VerdictMinTextMax {
		bad("verdict.min_text", "must be 1..%d bytes, got %d", VerdictMinTextMax, v.MinText)
	}
	if v.Agree < 1 || v.Agree > VerdictAgreeMax {
		bad("verdict.agree", "must be 1..%d, got %d", VerdictAgreeMax, v.Agree)
	}
	if v.AgreeSpan < 0 {
		bad("verdict.agree_span", "must not be negative, got %s", v.AgreeSpan)
	}
	if v.KeepBytes < VerdictKeepBytesMin || v.KeepBytes > VerdictKeepBytesMax {
		bad("verdict.keep_bytes", "must be 1MiB..16GiB, got %d", v.KeepBytes)
	}
}

// validateExpect compiles a route's expect, so that a bad selector is refused at load with
// its line rather than at the first render.
func validateExpect(path string, e RouteExpect, bad badFunc) {
	if _, err := verdict.CompileExpect(e.Selector, ""); err != nil {
		bad(path+".expect.selector", "%v", err)
	}
	if _, err := verdict.CompileExpect("", e.Text); err != nil {
		bad(path+".expect.text", "%v", err)
	}
}
