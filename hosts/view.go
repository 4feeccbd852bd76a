package hosts

import (
	"slices"
	"strings"
	"time"

	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// The people's view of politeness: the hosts the shared segment's host table holds (paused by
// a Retry-After, or limited below their maximum by their errors), each with the renders of it
// in flight, in one order — the most held back first. It is what /v1/queue's hosts section,
// freshqctl top's hosts block and the freshq_host_* metrics show, so the three agree. It only
// reads shared memory, from any process, and never blocks: a host slot being rewritten while
// it reads is left out of that read (the table's sequence lock), and a host that is not in the
// table is at its defaults and is not listed. The list is bounded by the table's capacity.

// Rows reads the host table at nowMs: every host it holds, with its allowance (Allow, under
// maxOf(host), its configured maximum), whether it is paused now and its renders in flight
// (its host tokens held), sorted by Compare.
func Rows(seg *shm.Segment, maxOf func(host []byte) int, nowMs int64) []wire.QueueHost {
	states := seg.Hosts().Snapshot()
	out := make([]wire.QueueHost, 0, len(states))
	for i := range states {
		out = append(out, row(seg, &states[i], maxOf([]byte(states[i].Host)), membershipOfHost(seg, states[i].Hash), nowMs))
	}
	slices.SortFunc(out, Compare)
	return out
}

func row(seg *shm.Segment, st *shm.HostState, hostMax int, farm Membership, nowMs int64) wire.QueueHost {
	a := Allow(st.Hash, *st, true, hostMax, farm, nowMs)
	r := wire.QueueHost{
		Host: st.Host, Paused: a.Paused, Limit: a.Limit, Max: a.Max,
		InFlight: InFlight(seg.Leases(), st.Hash, a.Max, nowMs),
		Cause:    CauseName(st.Cause), Status: int(st.Status), SinceMs: st.SinceMs,
	}
	if since, ok := jsonTime(st.SinceMs); ok {
		r.Since = since
	}
	r.PausedUntilMs = st.PausedUntilMs
	if until, ok := jsonTime(st.PausedUntilMs); ok {
		r.PausedUntil = &until
	}
	return r
}

// jsonTime is ms as a time JSON can carry (years 0 to 9999: encoding/json refuses others, and
// one such time would fail the whole answer); ok is false for 0 and for a time out of range,
// which only a corrupt slot holds (the writer stores its clock's times).
func jsonTime(ms int64) (time.Time, bool) {
	t := time.UnixMilli(ms).UTC()
	return t, ms != 0 && t.Year() >= 0 && t.Year() <= 9999
}

// Compare orders hosts by how much they are held back: the paused ones first, the longest
// pause first; then by limit ÷ max, the lowest first; then by name, so that equal rows keep
// one order from read to read.
func Compare(a, b wire.QueueHost) int {
	if a.Paused != b.Paused {
		if a.Paused {
			return -1
		}
		return 1
	}
	if a.Paused && a.PausedUntilMs != b.PausedUntilMs {
		if a.PausedUntilMs > b.PausedUntilMs {
			return -1
		}
		return 1
	}
	// limit/max against limit'/max', without division: both maxima are positive.
	if l, r := a.Limit*max(b.Max, 1), b.Limit*max(a.Max, 1); l != r {
		if l < r {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Host, b.Host)
}

// CauseName is the name of why a host is held back, as /v1/queue, the host metrics and the log
// lines say it: "retry_after" (a refusal paused it), "errors" (its errors lowered its limit),
// or "none".
func CauseName(c shm.HostCause) string {
	switch c {
	case shm.HostCauseRetryAfter:
		return "retry_after"
	case shm.HostCauseErrors:
		return "errors"
	}
	return "none"
}
