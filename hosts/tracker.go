package hosts

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/shm"
)

// Tracker runs Step for each result worker 0 applies, on the shared host table. It is the
// table's one writer: worker 0 holds the only Tracker. Observe is safe for concurrent use: the
// Applier's batches run at once on different keys, which may share a host, so each
// read-Step-write of a host is made under the Tracker's lock (no streak is lost).
//
// The shared table holds only hosts paused or throttled, what a take must know. A host whose
// only difference from its defaults is an error streak short of halve_after is kept in the
// Tracker's memory instead (at most maxStreaks of them; lost at worker 0's restart, which
// costs at most halve_after-1 errors of a host), so that one-off 5xx from many hosts never take,
// nor evict, the slot of a host the farm must hold back.
type Tracker struct {
	Seg    *shm.Segment
	Limits func() *Limits // render.hosts, read at each Observe, so a reload applies at once
	Log    zerolog.Logger
	// OnPause, when set, is told of every pause a refusal set or lengthened here (the host, the
	// pause's end in ms, the status): the Farm publishes it to the cluster's other nodes. It
	// must not block. nil on a node alone.
	OnPause func(host string, untilMs int64, status int)

	mu      sync.Mutex
	streaks map[uint64]shm.HostState // hosts at their defaults but for an error streak
}

// maxStreaks bounds the hosts whose error streak the Tracker remembers; past it the memory is
// forgotten whole (each streak is at most halve_after-1 errors, cheap to lose).
const maxStreaks = 4096

// Observe feeds one result of the row key to its host's state: it reads the host of the key,
// Loads its state, Steps, and Stores the state reached, or Deletes it when the host is no
// longer paused or throttled (an error streak alone is kept in the Tracker's memory). A change a human would want to know of is logged, one line: "host paused" (a
// refusal), "host throttled" (the limit moved and is below the maximum), "host restored" (back
// at its defaults), with the fields host, cause, status, limit and paused_until. A key without
// a host changes nothing. It returns whether the result was a refusal (Refusal).
func (t *Tracker) Observe(key []byte, o outcome.Outcome, status int, headers map[string]string, now int64) (refused bool) {
	refused = Refusal(o, status, headers)
	cfg := t.Limits()
	host := cfg.Site(key)
	if len(host) == 0 {
		return refused
	}
	maxInFlight := Clamp(cfg.Max(host))
	table := t.Seg.Hosts()
	h := shm.HostHash(host)
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, inTable := table.Load(h)
	found := inTable
	if !found {
		cur, found = t.streaks[h]
	}
	next, keep := Step(cur, found, Observation{Outcome: o, Status: status, Headers: headers}, cfg, maxInFlight, now)
	next.Host, next.Hash = string(host), h
	shared := keep && (next.PausedUntilMs != 0 || next.Limit != 0) // Step cleared a pause that passed
	switch {
	case shared && (!inTable || next != cur):
		if !table.Store(next) {
			// Its window is full of hosts paused at least as long: they keep their slots, and this
			// host's state is lost, as an eviction would have lost one of theirs.
			t.Log.Warn().Str("host", next.Host).Int64("paused_until_ms", next.PausedUntilMs).
				Msg("host table full of paused hosts; this host's state is not kept")
		}
	case !shared && inTable:
		table.Delete(h)
	}
	if keep && !shared {
		t.remember(next)
	} else {
		delete(t.streaks, h)
	}
	t.logChange(cur, found, next, keep, maxInFlight, now)
	if refused && t.OnPause != nil && next.PausedUntilMs > cur.PausedUntilMs {
		t.OnPause(next.Host, next.PausedUntilMs, int(next.Status))
	}
	return refused
}

// Adopt takes a pause another node of the farm saw: the host is paused until untilMs (this
// node's clock) after a refusal answered with status, unless it is paused later already. It
// changes nothing else of the host's state, and is logged as "host paused" with source
// "farm". A pause that has ended changes nothing.
func (t *Tracker) Adopt(host string, untilMs int64, status int, now int64) {
	if untilMs <= now || host == "" {
		return
	}
	table := t.Seg.Hosts()
	h := shm.HostHash([]byte(host))
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, found := table.Load(h)
	if !found {
		cur, found = t.streaks[h]
	}
	if found && cur.PausedUntilMs >= untilMs {
		return
	}
	next := cur
	if !found {
		next = shm.HostState{}
	}
	next.Host, next.Hash = host, h
	if next.PausedUntilMs <= now && next.Limit == 0 {
		next.SinceMs = now
	}
	next.PausedUntilMs, next.Cause, next.Status = untilMs, shm.HostCauseRetryAfter, uint16(status)
	if !table.Store(next) {
		t.Log.Warn().Str("host", host).Int64("paused_until_ms", untilMs).
			Msg("host table full of paused hosts; the farm's pause of this host is not kept")
		return
	}
	delete(t.streaks, h)
	t.Log.Info().Str("host", host).Str("cause", CauseName(next.Cause)).Int("status", status).Str("source", "farm").
		Str("paused_until", time.UnixMilli(untilMs).UTC().Format(pausedUntilFormat)).Msg("host paused")
}

// remember keeps st, a host at its defaults but for an error streak, in the Tracker's memory.
func (t *Tracker) remember(st shm.HostState) {
	if t.streaks == nil || len(t.streaks) >= maxStreaks {
		t.streaks = make(map[uint64]shm.HostState)
	}
	t.streaks[st.Hash] = st
}

// pausedUntilFormat is RFC 3339 to the millisecond, the resolution of a pause.
const pausedUntilFormat = "2006-01-02T15:04:05.000Z07:00"

// logChange logs the change from cur to next, if it is one an operator sees: a new or longer
// pause, a new limit, or the way back to the defaults.
func (t *Tracker) logChange(cur shm.HostState, found bool, next shm.HostState, keep bool, maxInFlight int, now int64) {
	if !found {
		cur = shm.HostState{}
	}
	if !keep {
		next = shm.HostState{Host: next.Host}
	}
	// The host's own state, as a node alone would have it: the farm's division is no news of
	// the host's.
	was := Allow(cur.Hash, cur, true, maxInFlight, Membership{}, now).Limit
	a := Allow(next.Hash, next, true, maxInFlight, Membership{}, now)
	limit, paused := a.Limit, a.Paused
	var msg string
	switch {
	case paused && next.PausedUntilMs != cur.PausedUntilMs:
		msg = "host paused"
	case limit != was && limit < maxInFlight:
		msg = "host throttled"
	case (cur.PausedUntilMs != 0 || cur.Limit != 0) && next.PausedUntilMs == 0 && next.Limit == 0:
		msg = "host restored"
	default:
		return
	}
	e := t.Log.Info().Str("host", next.Host).Str("cause", CauseName(next.Cause)).Int("status", int(next.Status)).Int("limit", limit)
	if paused {
		e = e.Str("paused_until", time.UnixMilli(next.PausedUntilMs).UTC().Format(pausedUntilFormat))
	}
	e.Msg(msg)
}
