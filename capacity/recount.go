package capacity

import (
	"context"
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

// ShardedSource is a store whose rows are divided into shards the nodes of a cluster hold
// (store/pgstore). A recount from it reads only the shards the node holds, each row with its
// target, in one statement: over the cluster every shard is read once per recount, by its
// owner, and never a statement per shard or per row.
type ShardedSource interface {
	Source
	// ForEachOwnedRow calls fn with every schedule row of the shards the node holds and the
	// row's target (nil when it has none), and returns those shards.
	ForEachOwnedRow(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) ([]int32, error)
}

// JoinedSource is a store that reads every schedule row with its target in one walk
// (store/badgerstore: the two key ranges side by side, in the same key order), where a Source's
// GetTarget is a point read per row. fn's target is nil when the row has none, and is valid only
// until fn returns.
type JoinedSource interface {
	Source
	ForEachScheduleWithTarget(ctx context.Context, fn func(key []byte, row store.Row, tgt *store.Target) error) error
}

// Drift compares the incremental demand with the recount that replaced it.
type Drift struct {
	Rows          int64 // rows the recount found with demand
	RowsDiffering int64 // keys whose contribution differed (or that only one side had)
	// RowsUnseen is those of them that only the recount had, in a recount of a node's shards
	// (ShardedSource): rows of its shards written through another node of the cluster and not
	// rendered here since, which the node could not have counted. They are no drift of its own.
	RowsUnseen       int64
	IncrementalTotal float64 // renders per second before the recount
	RecountTotal     float64 // renders per second after it
}

// Recount reads every row of src, rebuilds the ledger's counts exactly, logs the drift from the
// incremental counts on log (one info line "capacity recount" with rows, rows_differing,
// rows_unseen, demand_incremental, demand_recount, drift_renders_per_second and first; a
// warning when any key differed, other than the unseen rows of a node's shards, but for the
// first recount, whose counts before it held only the writes since
// the start; the Service's logger adds component=capacity), and returns it. A key written
// while the recount reads keeps what its write said.
//
// The recount corrects each key's entry where it is, as it reads the key, and drops the
// entries it did not read once it is done: the ledger never holds its rows twice (a node's
// rows are most of worker 0's memory beyond the store's). Every write stamps its key's entry
// with the recount running (the epoch), so a key the recount reads after a write of it is
// left as the write said, and a key deleted meanwhile is kept as a tombstone, which counts
// nothing, until the recount ends. On error the entries read so far hold what the store said
// and no entry is dropped; the counts are always the sum of the entries.
//
// From a ShardedSource (with SetShards) it reads the shards the node holds: the rows of those
// shards are replaced by what it read, the drift is measured over them alone, and the rows of
// every other shard (written through this node for another's shard, or of a shard it no longer
// holds) are dropped: their owner counts them.
func (l *Ledger) Recount(src Source, log zerolog.Logger) (Drift, error) {
	return l.RecountContext(context.Background(), src, log)
}

// RecountContext is Recount, whose read stops when ctx ends (so that Stop does not wait for a
// full read of a large store).
func (l *Ledger) RecountContext(ctx context.Context, src Source, log zerolog.Logger) (Drift, error) {
	l.mu.Lock()
	if l.recounting {
		l.mu.Unlock()
		return Drift{}, errRecounting
	}
	l.recounting = true
	// The epoch wraps after 65,536 recounts, harmlessly: a recount that succeeds leaves every
	// entry with its own epoch, so an entry could carry this one from before only if it had
	// been missed by 65,535 failed recounts in a row.
	l.epoch++
	epoch := l.epoch
	l.mu.Unlock()

	var d Drift
	corrections := counts{} // what the recount changed in the counts, to tell the incremental figure
	_, sharded := src.(ShardedSource)
	sharded = sharded && l.shardOf != nil
	correct := func(h uint64, e entry) {
		p := l.in.pack(e)
		p.epoch = epoch
		l.mu.Lock()
		defer l.mu.Unlock()
		old, had := l.rows[h]
		switch {
		case had && old.epoch == epoch: // written (or deleted) since the recount began
			return
		case had && sameContribution(old, p):
			l.rows[h] = p
			return
		case had:
			oe := l.in.unpack(old)
			l.counts.add(oe, -1)
			corrections.add(oe, -1)
		case sharded:
			d.RowsUnseen++
		}
		d.RowsDiffering++
		l.counts.add(e, 1)
		corrections.add(e, 1)
		l.rows[h] = p
	}
	read, err := l.read(ctx, src, correct)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.recounting = false
	for h, p := range l.rows {
		switch {
		case p.gone:
			delete(l.rows, h)
		case err == nil && p.epoch != epoch:
			// Neither read nor written since the recount began: the store has no such row,
			// or it is of a shard the node does not hold.
			e := l.in.unpack(p)
			if read == nil || read[e.shard] {
				d.RowsDiffering++
			}
			l.counts.add(e, -1)
			corrections.add(e, -1)
			delete(l.rows, h)
		}
	}
	if err != nil {
		return Drift{}, err
	}
	d.IncrementalTotal = l.counts.minus(corrections).demand(read).Total
	first := !l.counted
	l.counted = true
	dem := l.counts.demand(read)
	d.Rows, d.RecountTotal = dem.Rows, dem.Total
	ev := log.Info()
	if d.RowsDiffering > d.RowsUnseen && !first {
		ev = log.Warn()
	}
	ev.Bool("first", first).Int64("rows", d.Rows).Int64("rows_differing", d.RowsDiffering).Int64("rows_unseen", d.RowsUnseen).
		Float64("demand_incremental", d.IncrementalTotal).Float64("demand_recount", d.RecountTotal).
		Float64("drift_renders_per_second", math.Abs(d.RecountTotal-d.IncrementalTotal)).Msg("capacity recount")
	return d, nil
}

// minus returns c less d, as a new counts.
func (c counts) minus(d counts) counts {
	out := counts{}
	for b, m := range c {
		for cad, n := range m {
			out.add(entry{bucket: b, cadenceMs: cad}, n)
		}
	}
	for b, m := range d {
		for cad, n := range m {
			out.add(entry{bucket: b, cadenceMs: cad}, -n)
		}
	}
	return out
}

var errRecounting = errors.New("capacity: a recount is already running")

// read is the recount's read of src: it hands correct every row's key hash and contribution
// under the current policy, and returns the shards read (nil: every shard, a Source that is
// not sharded).
func (l *Ledger) read(ctx context.Context, src Source, correct func(h uint64, e entry)) (map[int32]bool, error) {
	pol := l.pol()
	add := func(key []byte, row store.Row, tgt *store.Target) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		storedMs, sealed := row.StoredIntervalMs, false
		if tgt != nil {
			storedMs, sealed = tgt.StoredIntervalMs, tgt.Terminal != store.TerminalNone
		}
		correct(l.hash(key), contribution(pol, key, l.shard(key), row, storedMs, sealed))
		return nil
	}
	if ss, ok := src.(ShardedSource); ok && l.shardOf != nil {
		shards, err := ss.ForEachOwnedRow(ctx, add)
		if err != nil {
			return nil, fmt.Errorf("capacity: recount: %w", err)
		}
		read := make(map[int32]bool, len(shards))
		for _, sh := range shards {
			read[sh] = true
		}
		return read, nil
	}
	if js, ok := src.(JoinedSource); ok {
		if err := js.ForEachScheduleWithTarget(ctx, add); err != nil {
			return nil, fmt.Errorf("capacity: recount: %w", err)
		}
		return nil, nil
	}
	err := src.ForEachSchedule(nil, func(key []byte, row store.Row) error {
		t, err := src.GetTarget(key)
		switch {
		case err == nil:
			return add(key, row, &t)
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("capacity: recount: target %q: %w", key, err)
		}
		return add(key, row, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("capacity: recount: %w", err)
	}
	return nil, nil
}
