package capacity

import (
	"errors"
	"fmt"
	"math"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/store"
)

// RecountEvery is how often worker 0 recounts demand exactly. A recount reads every row and its
// target; ten minutes keeps a drift short-lived at a cost of one full read per interval.
const RecountEvery = 10 * 60 * 1000 // ms

// Source is what a recount reads: every schedule row, and each row's target (for its stored
// interval and sealed state). store.Store is one.
type Source interface {
	ForEachSchedule(prefix []byte, fn func(key []byte, row store.Row) error) error
	GetTarget(cacheKey []byte) (store.Target, error)
}

// Drift compares the incremental demand with the recount that replaced it.
type Drift struct {
	Rows             int64   // rows the recount found with demand
	RowsDiffering    int64   // keys whose contribution differed (or that only one side had)
	IncrementalTotal float64 // renders per second before the recount
	RecountTotal     float64 // renders per second after it
}

// Recount reads every row of src, rebuilds the ledger's counts exactly, logs the drift from the
// incremental counts on log (one info line "capacity recount" with rows, rows_differing,
// demand_incremental, demand_recount, drift_renders_per_second and first; a warning when any
// key differed, but for the first recount, whose counts before it held only the writes since
// the start; the Service's logger adds component=capacity), and returns it. A key written
// while the recount reads keeps what its write said. On error the ledger is left as it was.
func (l *Ledger) Recount(src Source, log zerolog.Logger) (Drift, error) {
	l.mu.Lock()
	if l.recounting {
		l.mu.Unlock()
		return Drift{}, errRecounting
	}
	l.recounting, l.dirty = true, map[uint64]struct{}{}
	l.mu.Unlock()
	fresh, err := l.read(src)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recounting = false
	dirty := l.dirty
	l.dirty = nil
	if err != nil {
		return Drift{}, err
	}
	for h := range dirty {
		if e, ok := l.rows[h]; ok {
			fresh[h] = e
		} else {
			delete(fresh, h)
		}
	}
	d := Drift{IncrementalTotal: l.counts.demand().Total}
	for h, e := range fresh {
		if old, ok := l.rows[h]; !ok || old != e {
			d.RowsDiffering++
		}
	}
	for h := range l.rows {
		if _, ok := fresh[h]; !ok {
			d.RowsDiffering++
		}
	}
	c := counts{}
	for _, e := range fresh {
		c.add(l.in.unpack(e), 1)
	}
	l.rows, l.counts = fresh, c
	first := !l.counted
	l.counted = true
	dem := c.demand()
	d.Rows, d.RecountTotal = dem.Rows, dem.Total
	ev := log.Info()
	if d.RowsDiffering > 0 && !first {
		ev = log.Warn()
	}
	ev.Bool("first", first).Int64("rows", d.Rows).Int64("rows_differing", d.RowsDiffering).
		Float64("demand_incremental", d.IncrementalTotal).Float64("demand_recount", d.RecountTotal).
		Float64("drift_renders_per_second", math.Abs(d.RecountTotal-d.IncrementalTotal)).Msg("capacity recount")
	return d, nil
}

var errRecounting = errors.New("capacity: a recount is already running")

// read is the recount's read of src: every row's contribution under the current policy.
func (l *Ledger) read(src Source) (map[uint64]packed, error) {
	pol := l.pol()
	fresh := map[uint64]packed{}
	err := src.ForEachSchedule(nil, func(key []byte, row store.Row) error {
		storedMs, sealed := row.StoredIntervalMs, false
		t, err := src.GetTarget(key)
		switch {
		case err == nil:
			storedMs, sealed = t.StoredIntervalMs, t.Terminal != store.TerminalNone
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("capacity: recount: target %q: %w", key, err)
		}
		fresh[l.hash(key)] = l.in.pack(contribution(pol, key, row, storedMs, sealed))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("capacity: recount: %w", err)
	}
	return fresh, nil
}
