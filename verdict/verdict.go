package verdict

import "time"

// Reasons is a set of reasons a render is suspect, one bit each. The zero value is a good
// render. The bits are stored (a target keeps the last verdict's), so a bit's meaning never
// changes; new reasons take new bits.
type Reasons uint32

// The reasons. Each has a stable name (Names).
const (
	Exception       Reasons = 1 << iota // "exception": the page's scripts threw uncaught
	FailedRequest                       // "failed_request": a same-site data request failed
	PendingRequest                      // "pending_request": captured with same-site data requests in flight
	TextCollapsed                       // "text_collapsed": visible text under Settings.CollapseRatio of the last good render's
	LostTitle                           // "lost_title": the last good render had a <title>, this one has none
	LostH1                              // "lost_h1"
	LostDescription                     // "lost_description": meta name=description
	LostCanonical                       // "lost_canonical": link rel=canonical
	ExpectMissing                       // "expect_missing": the route's Expect is not on the page
)

// Landmarks summarise a good render: what a later render must keep to be believed.
type Landmarks struct {
	// TextLen is the bytes of visible text: outside script, style, template, noscript, iframe,
	// head and comments, entities decoded, each run of whitespace between text counted as one
	// byte (leading and trailing ones not at all).
	TextLen     uint32
	Title       bool // the document's <title> (its first outside svg/math) has non-blank text
	H1          bool // an <h1> has non-blank visible text
	Description bool // a <meta name="description"> (name without case) with non-blank content
	Canonical   bool // a <link> whose rel tokens include canonical, with a non-blank href
}

// Render is what Judge looks at.
type Render struct {
	Landmarks Landmarks // Inspect of the rendered body
	// Unchanged is set when the render's content digest equals the last good render's: such a
	// render is never suspect, whatever its signals.
	Unchanged       bool
	Exceptions      int
	FailedRequests  int
	PendingRequests int
	// ExpectFound is whether the body has the route's Expect (InspectExpect reads it with the
	// landmarks); ignored when the route has no Expect.
	ExpectFound bool
}

// Settings are the thresholds (configuration: the verdict section).
type Settings struct {
	// CollapseRatio: a render whose visible text is under this fraction of the last good
	// render's has collapsed (TextCollapsed).
	CollapseRatio float64
	// MinText: a last good render with less visible text than this is not compared for a
	// collapse (a page of a few words has nothing to lose).
	MinText uint32
	// Agree and AgreeSpan: suspect renders with the same content, Agree of them over at least
	// AgreeSpan, are the site's real change, and accepted (Agreement).
	Agree     int
	AgreeSpan time.Duration
}

// Verdict is the judgement of one render.
type Verdict struct {
	Reasons Reasons
}

// Suspect reports whether the render must not replace a good page.
func (v Verdict) Suspect() bool { return v.Reasons != 0 }
