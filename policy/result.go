package policy

import (
	"math"

	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/store"
)

// What a render's outcome does to its row and target: success, or a failure of one of the three
// kinds below (transient, deterministic, terminal). Outcomes are the leaf package outcome's
// type, shared with the renderers, so policy does not depend on the renderer.

// Class is what an outcome means for scheduling.
type Class uint8

const (
	ClassSuccess   Class = iota + 1 // rendered: next due one cadence from now
	ClassTransient                  // may succeed on retry: back off
	ClassGone                       // 404/410: sealed as gone after enough strikes
	ClassNoindex                    // the page asks not to be indexed: sealed as suppressed after enough strikes
	ClassBlocked                    // the host is outside render.domains: retried only at max_backoff
)

func (c Class) String() string {
	switch c {
	case ClassSuccess:
		return "success"
	case ClassTransient:
		return "transient"
	case ClassGone:
		return "gone"
	case ClassNoindex:
		return "noindex"
	case ClassBlocked:
		return "blocked"
	}
	return "unknown"
}

// Classify maps a render outcome to its class. Any other outcome, and a value that is not an
// outcome, is transient: a failure nobody has classified proves nothing, so it must not seal
// anything.
func Classify(o outcome.Outcome) Class {
	switch o {
	case outcome.OK:
		return ClassSuccess
	case outcome.NotFound, outcome.Gone:
		return ClassGone
	case outcome.Noindex:
		return ClassNoindex
	case outcome.Blocked:
		return ClassBlocked
	}
	return ClassTransient
}

// Terminal states a target can be sealed in.
const (
	TerminalNone       = ""
	TerminalGone       = "gone"
	TerminalSuppressed = "suppressed"
)

// State is what the result decision needs to know about a row and its target before the attempt.
type State struct {
	Key              []byte
	Submitted        bool
	CarriedMs        int64 // the row's effective interval; 0 = absent
	StoredIntervalMs int64 // an explicit interval from the API or a sitemap; 0 = none (the ladder decides)
	DemandRung       uint8 // 0 = not on the ladder yet; r+1 = ladder rung r
	Visited          bool  // the page was requested since its last render
	FailCount        uint32
	FailClass        string // class name of the current failure streak
	FailFirstMs      int64
	NeverRendered    bool
}

// Decision is the new row and target state after an attempt.
type Decision struct {
	Class         Class
	DueAtMs       int64
	CadenceMs     int64 // the cadence to carry on the row (never the gap filed as the due time)
	DemandRung    uint8
	FailCount     uint32
	FailClass     string
	FailFirstMs   int64
	FailLastMs    int64
	Terminal      string // TerminalNone unless sealed by this attempt
	RecheckAtMs   int64  // when a sealed target is checked again
	Failing       bool
	NeverRendered bool
	StorePage     bool // a successful render's page replaces the stored one
}

// Apply decides what an attempt with the given outcome does at nowMs.
//
//   - Success: due one cadence from now. A row without an explicit interval moves along the
//     demand ladder: one rung faster if the page was visited since its last render, one rung
//     slower otherwise, and never slower than its route's ceiling. The ladder changes only here,
//     never when scoring.
//   - Transient: retried after render.failure_retry: fast_retries at fast_delay, then
//     ×factor per further failure up to max_backoff; a row that was not submitted waits ×penalty.
//   - Gone / noindex: sealed by cause (gone, suppressed) once that cause has been seen
//     `strikes` times in a row, then rechecked after its recheck period; before that, retried
//     like a transient failure. Evidence, not elapsed time, seals.
//   - Blocked: retried only at max_backoff; configuration may change.
//
// The cadence carried on the row is always the page's cadence, never the retry gap.
func (p *Policy) Apply(st State, o outcome.Outcome, nowMs int64) Decision {
	return p.ApplyRoute(st, p.Resolve(st.Key), o, nowMs)
}

// ApplyRoute is Apply for a state whose key's route kr was resolved already (Resolve).
func (p *Policy) ApplyRoute(st State, kr KeyRoute, o outcome.Outcome, nowMs int64) Decision {
	opts := &p.opts
	d := Decision{Class: Classify(o), DemandRung: st.DemandRung, NeverRendered: st.NeverRendered}
	row := Row{Key: st.Key, Row: store.Row{Projection: store.Projection{
		EffectiveIntervalMs: st.CarriedMs, StoredIntervalMs: st.StoredIntervalMs, Submitted: st.Submitted}}}
	if d.Class == ClassSuccess {
		if st.StoredIntervalMs == 0 && len(opts.Ladder) > 0 {
			d.DemandRung = p.nextRung(st, kr)
			row.EffectiveIntervalMs = opts.Ladder[d.DemandRung-1].Milliseconds()
		} else if st.StoredIntervalMs > 0 {
			row.EffectiveIntervalMs = st.StoredIntervalMs
		}
		d.CadenceMs, _ = p.CadenceOf(&row, kr)
		d.DueAtMs = nowMs + d.CadenceMs
		d.StorePage, d.NeverRendered = true, false
		return d
	}
	d.CadenceMs, _ = p.CadenceOf(&row, kr) // carried unchanged (or resolved, so the row becomes self-describing)
	d.Failing = true
	d.FailClass = d.Class.String()
	d.FailCount, d.FailFirstMs = 1, nowMs
	if st.FailClass == d.FailClass && st.FailCount > 0 {
		d.FailCount, d.FailFirstMs = st.FailCount+1, st.FailFirstMs
	}
	d.FailLastMs = nowMs
	switch {
	case d.Class == ClassGone && int(d.FailCount) >= opts.Gone.Strikes:
		d.Terminal, d.RecheckAtMs = TerminalGone, nowMs+opts.Gone.Recheck.Milliseconds()
		d.DueAtMs = d.RecheckAtMs
	case d.Class == ClassNoindex && int(d.FailCount) >= opts.Noindex.Strikes:
		d.Terminal, d.RecheckAtMs = TerminalSuppressed, nowMs+opts.Noindex.Recheck.Milliseconds()
		d.DueAtMs = d.RecheckAtMs
	case d.Class == ClassBlocked:
		d.DueAtMs = nowMs + opts.Retry.MaxBackoff.Milliseconds()
	default:
		d.DueAtMs = nowMs + p.Backoff(d.FailCount, st.Submitted)
	}
	return d
}

// Backoff is the retry delay in ms after the n-th consecutive failure (n ≥ 1).
func (p *Policy) Backoff(n uint32, submitted bool) int64 {
	fr := &p.opts.Retry
	maxMs := float64(fr.MaxBackoff.Milliseconds())
	delay := float64(fr.FastDelay.Milliseconds())
	if extra := int(n) - fr.FastRetries; extra > 0 {
		delay *= math.Pow(fr.Factor, float64(extra))
	}
	if !submitted {
		delay *= fr.NonSubmittedPenalty
	}
	return int64(math.Min(delay, maxMs))
}

// nextRung moves a row along the demand ladder after a successful render: one rung faster when
// visited, one slower otherwise. A row new to the ladder starts on the slowest rung that its
// route's ceiling allows (the route still clamps at score time).
func (p *Policy) nextRung(st State, kr KeyRoute) uint8 {
	ladder := p.opts.Ladder
	if st.DemandRung == 0 {
		ceiling := int64(math.MaxInt64)
		if kr.IntervalMs > 0 {
			ceiling = kr.IntervalMs
		}
		start := 0
		for i, r := range ladder {
			if r.Milliseconds() <= ceiling {
				start = i
			}
		}
		return uint8(start + 1)
	}
	r := int(st.DemandRung) - 1
	if st.Visited {
		r--
	} else {
		r++
	}
	return uint8(min(max(r, 0), len(ladder)-1) + 1)
}
