package hosts

import (
	"time"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/shm"
)

// MinPause is the shortest pause a refusal causes: a 429 without Retry-After, or a Retry-After
// of 0 or of a date already passed, still holds the host back for a second.
const MinPause = time.Second

// RetryAfterHeader is the key of the Retry-After header in a result's Headers (lower-case, as
// render keeps it).
const RetryAfterHeader = "retry-after"

// Observation is what one render's result says about its host.
type Observation struct {
	Outcome outcome.Outcome
	Status  int               // the HTTP status, 0 when there was no response
	Headers map[string]string // lower-case names; RetryAfterHeader is the one read
}

// Refusal reports whether a result is the host refusing the render, not the page failing: a 429
// (too many requests), or a 503 with a Retry-After that parses (the origin says when to come
// back). It is classified as an HTTP error answer (server_error, or client_error as a remote
// renderer may call a 429). A 503 without a usable Retry-After is an ordinary 5xx: it counts
// towards halving the host's limit, and its row is struck as any failure.
func Refusal(o outcome.Outcome, status int, headers map[string]string) bool {
	if o != outcome.ServerError && o != outcome.ClientError {
		return false
	}
	switch status {
	case 429:
		return true
	case 503:
		_, ok := ParseRetryAfter(headers[RetryAfterHeader], time.Time{})
		return ok
	}
	return false
}

// Step is the host state machine: the state a host reaches from cur (found false: the host is
// not in the table, so at its defaults; cur is then ignored) after one result, obs, at now (ms),
// with maxInFlight the host's configured maximum in flight (config.Hosts.Max) and cfg the rest of
// render.hosts. keep is false when the state reached is the host's defaults: the caller deletes
// it from the table. Step is pure: the same arguments always give the same answer.
//
// Per result:
//   - a pause that has passed is over (PausedUntilMs 0) before the result is counted;
//   - a refusal (Refusal) pauses the host until now + its Retry-After, clamped to
//     [MinPause, max_pause]; a pause already further ahead is kept. Without a Retry-After (a
//     429) the pause is MinPause and the limit is also halved. Both streaks restart;
//   - a 5xx that is no refusal, or a timeout, adds to the error streak; at halve_after the limit
//     halves (at least 1) and the streak restarts;
//   - a 2xx (ok or noindex) adds to the success streak and ends the error streak; at grow_after
//     a lowered limit rises by one and the streak restarts. A pause is not shortened;
//   - any other answer (404, 410, another 4xx) ends the error streak: the host answers;
//   - a result without an answer about the host's load (network, redirect_loop, too_large,
//     blocked, failed) changes nothing.
//
// The limit is kept below max or as 0 ("at max"); a stored limit at or above a max lowered by a
// reload is max. Cause and Status say what last paused or lowered the host, SinceMs when it
// left its defaults; all three are cleared once it is back at them.
func Step(cur shm.HostState, found bool, obs Observation, cfg *Limits, maxInFlight int, now int64) (next shm.HostState, keep bool) {
	ceiling := Clamp(maxInFlight)
	s := shm.HostState{}
	if found {
		s = cur
	}
	limit := ceiling
	if s.Limit > 0 && int(s.Limit) < ceiling {
		limit = int(s.Limit)
	}
	if s.PausedUntilMs != 0 && s.PausedUntilMs <= now {
		s.PausedUntilMs = 0
	}
	wasDefault := s.PausedUntilMs == 0 && limit == ceiling
	switch o := obs.Outcome; {
	case Refusal(o, obs.Status, obs.Headers):
		d, ok := ParseRetryAfter(obs.Headers[RetryAfterHeader], time.UnixMilli(now))
		if !ok {
			limit = halve(limit) // "too many", not saying for how long: send fewer, too
		}
		d = min(max(d, MinPause), cfg.MaxPause)
		s.PausedUntilMs = max(s.PausedUntilMs, now+d.Milliseconds())
		s.ErrStreak, s.OKStreak = 0, 0
		s.Cause, s.Status = shm.HostCauseRetryAfter, uint16(obs.Status)
	case o == outcome.ServerError || o == outcome.Timeout:
		s.OKStreak = 0
		s.ErrStreak++
		if int(s.ErrStreak) >= cfg.HalveAfter {
			s.ErrStreak = 0
			if limit > 1 {
				limit = halve(limit)
				if s.PausedUntilMs == 0 { // a pause stays the visible cause while it lasts
					s.Cause, s.Status = shm.HostCauseErrors, uint16(max(obs.Status, 0))
				}
			}
		}
	case o == outcome.OK || o == outcome.Noindex:
		s.ErrStreak = 0
		if limit < ceiling {
			s.OKStreak++
			if int(s.OKStreak) >= cfg.GrowAfter {
				limit++
				s.OKStreak = 0
			}
		}
	case o.Response():
		s.ErrStreak = 0
	}
	if wasDefault && (s.PausedUntilMs != 0 || limit < ceiling) {
		s.SinceMs = now
	}
	s.Limit = 0
	if limit < ceiling {
		s.Limit = uint32(limit)
	}
	if s.PausedUntilMs == 0 && s.Limit == 0 {
		s.Cause, s.Status, s.SinceMs, s.OKStreak = shm.HostCauseNone, 0, 0, 0
	}
	return s, s.PausedUntilMs != 0 || s.Limit != 0 || s.ErrStreak != 0
}

// Clamp bounds a host's configured maximum to what the lease table can admit: 1..MaxTokens.
func Clamp(n int) int { return min(max(n, 1), MaxTokens) }

func halve(limit int) int { return max(limit/2, 1) }
