package hosts

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter bounds what ParseRetryAfter returns: a longer delay (delta-seconds of any
// length, or a date centuries ahead) is read as this. It keeps the arithmetic on a parsed value
// from overflowing; the pause a host gets is capped far lower, by render.hosts.max_pause.
const MaxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3): delta-seconds (a run of
// ASCII digits) or an HTTP-date (any of the three formats net/http.ParseTime accepts), relative
// to now. Blanks around the value are ignored. It returns the delay, at most MaxRetryAfter; a
// date already passed is a delay of 0 (the origin asks for no wait). ok is false for anything
// else: an empty value, a sign ("-5", "+5"), a fraction, garbage. It never panics and never
// returns a negative delay.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		return parseDeltaSeconds(v)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if !t.After(now) {
		return 0, true
	}
	// Sub saturates at the largest Duration instead of overflowing, and a date a year or more
	// away has no meaning for a pause anyway.
	return min(t.Sub(now), MaxRetryAfter), true
}

// parseDeltaSeconds reads a run of ASCII digits as seconds, saturating at MaxRetryAfter.
func parseDeltaSeconds(v string) (time.Duration, bool) {
	var secs int64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, false
		}
		// Past the cap the value is the cap: later digits are only checked, so secs stays
		// below ten times the cap and the multiplication below never overflows.
		if secs < int64(MaxRetryAfter/time.Second) {
			secs = secs*10 + int64(v[i]-'0')
		}
	}
	return min(time.Duration(secs)*time.Second, MaxRetryAfter), true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
