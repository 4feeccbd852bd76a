package store

// Plausible due times, refused outside with Options.RefuseImplausibleDue. A due time is a
// wall-clock freshness deadline: one before MinDueMs scores as the most overdue row there is,
// holds the floor down and is granted before everything else; one after MaxDueMs is a typo
// that would never come due. The API refuses both before they reach the funnel.
const (
	MinDueMs = 946_684_800_000   // 2000-01-01T00:00:00Z
	MaxDueMs = 4_102_444_800_000 // 2100-01-01T00:00:00Z
)

// PlausibleDue reports whether ms lies in [MinDueMs, MaxDueMs]. A row stored before the funnel
// refused implausible due times may hold one outside: a writer that keeps a stored due time
// brings such a one into range first (the API treats it as due now), so that the funnel's
// refusal stays an assertion.
func PlausibleDue(ms int64) bool { return ms >= MinDueMs && ms <= MaxDueMs }

// Schedule is one schedule put for the funnel. Its fields are unexported: the only way to make
// one is NewSchedule, which takes every field of the record explicitly. The funnel rejects the
// zero value with ErrScheduleUnset.
type Schedule struct {
	key []byte
	row Row // the row's mirror of its target (Mirror) is the funnel's to fill
	set bool
}

// NewSchedule builds the schedule put of cacheKey: due at dueAtMs, from a sitemap or not, with
// the given effective interval (0 = absent, resolved from configuration at score time) and
// lane inputs. It copies cacheKey. What the projection mirrors of the target (Mirror) is not an
// argument: the funnel fills it.
func NewSchedule(cacheKey []byte, dueAtMs int64, submitted bool, effectiveIntervalMs int64, lanes Lanes) (Schedule, error) {
	if err := validateKey(cacheKey); err != nil {
		return Schedule{}, err
	}
	if dueAtMs < 0 {
		return Schedule{}, ErrNegativeDue
	}
	if effectiveIntervalMs < 0 {
		return Schedule{}, ErrNegativeInterval
	}
	return Schedule{
		key: append([]byte(nil), cacheKey...),
		row: Row{DueAtMs: dueAtMs, Projection: Projection{
			Submitted:           submitted,
			EffectiveIntervalMs: effectiveIntervalMs,
			Lanes:               lanes,
		}},
		set: true,
	}, nil
}

// WithRankInterval returns the schedule with the rank interval rankIntervalMs (see
// Projection.RankIntervalMs; 0: none, the row ranks by its cadence).
func (s Schedule) WithRankInterval(rankIntervalMs int64) (Schedule, error) {
	if rankIntervalMs < 0 {
		return Schedule{}, ErrNegativeInterval
	}
	s.row.RankIntervalMs = rankIntervalMs
	return s, nil
}

// RankIntervalMs returns the rank interval (0 = none).
func (s Schedule) RankIntervalMs() int64 { return s.row.RankIntervalMs }

// Key returns the schedule's cacheKey. The caller must not modify it.
func (s Schedule) Key() []byte { return s.key }

// DueAtMs returns the due time.
func (s Schedule) DueAtMs() int64 { return s.row.DueAtMs }

// Submitted returns the submitted fact.
func (s Schedule) Submitted() bool { return s.row.Submitted }

// EffectiveIntervalMs returns the effective interval (0 = absent).
func (s Schedule) EffectiveIntervalMs() int64 { return s.row.EffectiveIntervalMs }

// Lanes returns the lane inputs.
func (s Schedule) Lanes() Lanes { return s.row.Lanes }

// Row returns the row the schedule files, with a zero Mirror: the funnel fills that from the
// target or the row it replaces. Every backend builds its row from here,
// so a field added to a schedule reaches both.
func (s Schedule) Row() Row { return s.row }

// Write is one funnel write: a schedule put, and optionally the target and page of the same
// key, all committed in one transaction. A render result is one Write: its reschedule, its
// target update and its page, with no other store write.
type Write struct {
	Schedule Schedule
	Target   *Target // if set, replaces t/; the row mirrors it (Mirror)
	Page     *Page   // if set, replaces p/
	// DropPage deletes p/ in the same transaction (POST /v1/prioritize mode=wait: the cached
	// page is dropped and cadence refills it). Ignored when Page is set.
	DropPage bool
}
