package verdict

import "strings"

var reasonNames = [...]string{
	"exception", "failed_request", "pending_request", "text_collapsed",
	"lost_title", "lost_h1", "lost_description", "lost_canonical", "expect_missing",
}

// Names returns the names of the reasons in r, in bit order.
func (r Reasons) Names() []string {
	var out []string
	for i, name := range reasonNames {
		if r&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// String is the names joined with commas; "good" for none.
func (r Reasons) String() string {
	if r == 0 {
		return "good"
	}
	return strings.Join(r.Names(), ",")
}

// AllNames is every reason's name, in bit order: a metric's label values.
func AllNames() []string { return append([]string(nil), reasonNames[:]...) }

// Known reports whether r holds only reasons this version knows; a stored value with other bits
// set comes from a newer version or is corrupt.
func (r Reasons) Known() bool { return r&^(1<<len(reasonNames)-1) == 0 }

// Judge judges one render. last is the last good render's landmarks (Render.Baseline), nil
// when the page has none; exp the route's Expect, nil when it has none. It never panics.
//
// A signal counts against the render only when it has more of it than the last good render
// had (with none, any counts): a site whose pages always throw, keep a long-poll pending or
// ask an API that refuses a visitor would otherwise have every render suspect, and its page,
// kept at its last good render until renders agree, stale whenever its content changes.
func Judge(s *Settings, r *Render, last *Landmarks, exp *Expect) Verdict {
	if r.Unchanged {
		return Verdict{}
	}
	var usual Landmarks // the signals the last good render had; none without one
	if last != nil {
		usual = *last
	}
	var v Reasons
	if r.Exceptions > int(usual.Exceptions) {
		v |= Exception
	}
	if r.FailedRequests > int(usual.FailedRequests) {
		v |= FailedRequest
	}
	if r.PendingRequests > int(usual.PendingRequests) {
		v |= PendingRequest
	}
	if exp != nil && !r.ExpectFound {
		v |= ExpectMissing
	}
	if last != nil {
		cur := r.Landmarks
		if last.TextLen >= s.MinText && float64(cur.TextLen) < s.CollapseRatio*float64(last.TextLen) {
			v |= TextCollapsed
		}
		if last.Title && !cur.Title {
			v |= LostTitle
		}
		if last.H1 && !cur.H1 {
			v |= LostH1
		}
		if last.Description && !cur.Description {
			v |= LostDescription
		}
		if last.Canonical && !cur.Canonical {
			v |= LostCanonical
		}
	}
	return Verdict{Reasons: v}
}

// Agreement is the run of suspect renders of one page whose content was the same: the evidence
// that a suspect is the site's real change rather than a failure.
type Agreement struct {
	Digest  uint64 // the content digest the run agrees on; 0: no run
	Count   int    // suspect renders with that digest, in a row
	FirstMs int64  // the first of them
	LastMs  int64  // the latest
}

// Observe returns the run after one more suspect render with digest at nowMs: one longer when
// the digest is the run's, else a new run of one.
func (a Agreement) Observe(digest uint64, nowMs int64) Agreement {
	if a.Count > 0 && a.Digest == digest && digest != 0 {
		a.Count++
		a.LastMs = nowMs
		return a
	}
	return Agreement{Digest: digest, Count: 1, FirstMs: nowMs, LastMs: nowMs}
}

// Agreed reports whether the run decides: at least s.Agree renders over at least s.AgreeSpan.
func (a Agreement) Agreed(s *Settings) bool {
	return a.Digest != 0 && a.Count >= s.Agree && a.LastMs-a.FirstMs >= s.AgreeSpan.Milliseconds()
}
