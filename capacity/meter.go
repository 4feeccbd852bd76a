package capacity

import "sync"

// Kind is what a completed render was for.
type Kind uint8

// Kinds of render.
const (
	KindCadence Kind = iota // a render the row's cadence asked for
	KindRetry               // a retry of a failing row: outside the cadences
	KindRecheck             // a recheck of a sealed target: outside the cadences
)

// MeterWindow is the window capacity is smoothed over (ms): long enough that a burst of short
// renders or a pause of a few minutes does not swing the projection, short enough that a
// change of the farm shows within the quarter hour.
const MeterWindow = 15 * 60 * 1000

// meterBucketMs is the meter's resolution: the window slides in steps of this.
const meterBucketMs = 10 * 1000

const meterBuckets = MeterWindow / meterBucketMs

// Meter counts completed renders in a window sliding over an injected clock. It is safe for
// concurrent use. Time never flows inside it: every call says what time it is.
type Meter struct {
	mu      sync.Mutex
	startMs int64 // first time seen; the window is shorter than MeterWindow until it is that old
	started bool
	ring    [meterBuckets]meterBucket
}

type meterBucket struct {
	slot    int64 // atMs / meterBucketMs of the renders counted here
	total   int64
	retry   int64
	recheck int64
}

// Record counts one render completed at atMs.
func (m *Meter) Record(atMs int64, k Kind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start(atMs)
	slot := atMs / meterBucketMs
	b := &m.ring[slot%meterBuckets]
	if b.slot != slot {
		*b = meterBucket{slot: slot}
	}
	b.total++
	switch k {
	case KindRetry:
		b.retry++
	case KindRecheck:
		b.recheck++
	}
}

func (m *Meter) start(nowMs int64) {
	if !m.started || nowMs < m.startMs {
		m.started, m.startMs = true, nowMs
	}
}

// Capacity is what the meter measured over its window.
type Capacity struct {
	PerSecond    float64 // renders completed per second
	RetryShare   float64 // share of them that were retries
	RecheckShare float64 // share of them that were rechecks
	Renders      int64   // renders in the window
	WindowMs     int64   // the window's length: MeterWindow, or less since the meter started
}

// Rate returns capacity as of nowMs: the renders of the last MeterWindow (or since the meter
// started, if that is shorter) divided by that span.
func (m *Meter) Rate(nowMs int64) Capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.start(nowMs)
	cur := nowMs / meterBucketMs
	var c Capacity
	var retry, recheck int64
	for i := range m.ring {
		b := &m.ring[i]
		if b.total == 0 || b.slot > cur || b.slot <= cur-meterBuckets {
			continue
		}
		c.Renders += b.total
		retry += b.retry
		recheck += b.recheck
	}
	// The window covers the buckets counted: the current one up to now, and the whole ones
	// before it, but never reaches back before the meter started.
	c.WindowMs = min(int64(MeterWindow)-meterBucketMs+nowMs%meterBucketMs, nowMs-m.startMs)
	if c.WindowMs < meterBucketMs {
		c.WindowMs = meterBucketMs // a meter seconds old does not claim a huge rate
	}
	c.PerSecond = float64(c.Renders) * 1000 / float64(c.WindowMs)
	if c.Renders > 0 {
		c.RetryShare = float64(retry) / float64(c.Renders)
		c.RecheckShare = float64(recheck) / float64(c.Renders)
	}
	return c
}
