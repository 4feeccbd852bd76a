package verdict

import (
	"slices"
	"testing"
	"time"
)

// settings are the configuration's defaults.
var settings = Settings{CollapseRatio: 0.33, MinText: 200, Agree: 3, AgreeSpan: 30 * time.Minute}

// TestJudgePairs judges a render of a page against the page's last good render, both read from
// real-looking HTML with Inspect: the renders that completed but lost the page are suspect for
// the reasons named, and the page's real changes are good.
func TestJudgePairs(t *testing.T) {
	addToCart, err := CompileExpect("#add-to-cart", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		last, next string // testdata pages; last "" : no good render yet
		exp        *Expect
		unchanged  bool
		want       []string
	}{
		{"an SPA's error state replaces the product page", "product", "spa-error", nil, false,
			[]string{"text_collapsed", "lost_h1"}},
		{"the SPA's error state, with the route's expect", "product", "spa-error", addToCart, false,
			[]string{"text_collapsed", "lost_h1", "expect_missing"}},
		{"a Loading… shell replaces the product page", "product", "loading", nil, false,
			[]string{"text_collapsed", "lost_h1", "lost_description", "lost_canonical"}},
		{"a maintenance page served with 200", "product", "maintenance", nil, false,
			[]string{"text_collapsed", "lost_description", "lost_canonical"}},
		{"a maintenance page on a catalogue", "catalogue", "maintenance", addToCart, false,
			[]string{"text_collapsed", "lost_description", "lost_canonical", "expect_missing"}},
		{"a real shrink: fewer reviews", "product", "product-shrunk", addToCart, false, nil},
		{"identical pages", "product", "product", addToCart, false, nil},
		{"identical catalogue", "catalogue", "catalogue", nil, false, nil},
		{"the page grows back", "loading", "product", nil, false, nil},
		{"a page of a few words has nothing to collapse", "maintenance", "loading", nil, false,
			[]string{"lost_h1"}},
		{"no good render yet: judged on expect alone", "", "loading", addToCart, false,
			[]string{"expect_missing"}},
		{"no good render yet, nothing expected", "", "loading", nil, false, nil},
		{"content unchanged from the last good render is never suspect", "product", "loading", addToCart, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last *Landmarks
			if tc.last != "" {
				lm := Inspect(page(t, tc.last))
				last = &lm
			}
			lm, found := InspectExpect(page(t, tc.next), tc.exp)
			r := Render{Landmarks: lm, ExpectFound: found, Unchanged: tc.unchanged}
			v := Judge(&settings, &r, last, tc.exp)
			if got := v.Reasons.Names(); !slices.Equal(got, tc.want) {
				t.Errorf("reasons %v, want %v (last %+v, this %+v)", got, tc.want, last, lm)
			}
			if v.Suspect() != (len(tc.want) > 0) {
				t.Errorf("Suspect() = %v with reasons %v", v.Suspect(), v.Reasons)
			}
		})
	}
}

// TestJudgeCollapseBoundary pins the collapse rule: under CollapseRatio of the last good
// render's text is collapsed, at it is not; a last good render under MinText is not compared.
func TestJudgeCollapseBoundary(t *testing.T) {
	for _, tc := range []struct {
		last, cur uint32
		want      bool
	}{
		{1000, 329, true},
		{1000, 330, false},
		{1000, 1000, false},
		{1000, 0, true},
		{200, 0, true},
		{199, 0, false},
		{0, 0, false},
	} {
		last := Landmarks{TextLen: tc.last}
		r := Render{Landmarks: Landmarks{TextLen: tc.cur}}
		got := Judge(&settings, &r, &last, nil).Reasons&TextCollapsed != 0
		if got != tc.want {
			t.Errorf("last %d bytes, this %d: collapsed %v, want %v", tc.last, tc.cur, got, tc.want)
		}
	}
}

// TestJudgeSignals: the renderer's signals make a render suspect whatever its landmarks, and
// each reason has its stable name.
func TestJudgeSignals(t *testing.T) {
	lm := Inspect(page(t, "product"))
	r := Render{Landmarks: lm, Exceptions: 1, FailedRequests: 2, PendingRequests: 3, ExpectFound: true}
	v := Judge(&settings, &r, &lm, nil)
	if got, want := v.Reasons.String(), "exception,failed_request,pending_request"; got != want {
		t.Errorf("reasons %s, want %s", got, want)
	}
	if !v.Reasons.Known() || Reasons(1<<len(reasonNames)).Known() {
		t.Error("Known is wrong")
	}
}
