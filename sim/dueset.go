package sim

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
)

// DueSet is an in-memory due index with the store's contract: sweep.Store (BeginPass,
// WriteSchedule), sweep.Pass, and claim.Scanner (ScanDue). Rows are ordered ascending by
// (dueAt, key), exactly as Badger orders d/ keys (8-byte big-endian due time, then the key's
// bytes), so the production sweep and index scan see the order they see in production.
//
// It keeps the floor protocol of store/badgerstore/protocol.go (F1: every row has dueAt ≥ floor whenever no
// pass is open): a write lowers the floor cell to its due time; a pass advances it by
// compare-and-swap from the floor it read, to at most min(first due observed, its now, any
// write made while it was open) − guard. The simulator is single-threaded, so the in-flight
// bookkeeping of the Badger store reduces to "writes made while the pass was open".
//
// Rows live in buckets one bucketMs wide, indexed by due time; a bucket is sorted lazily the
// first time an iteration needs it after a write. Writes cost O(bucket) and a pass costs
// O(rows read + buckets walked): the sweep over the due set is the simulator's hot loop.
//
// A DueSet is not safe for concurrent use. Keys handed out (by IterateDue and ScanDue) alias
// the set's own storage, which is never modified in place: they stay valid for the life of the
// set, which is more than the store promises.
type DueSet struct {
	floor store.FloorCell
	ids   map[string]int32
	keys  [][]byte // by id; immutable
	dues  []int64  // by id: the row's due time; -1 = no row
	// stored mirrors each row's StoredIntervalMs, which a put carries over (the funnel's rule).
	stored []int64
	// buckets[i] holds the rows due in [(base+i)·bucketMs, (base+i+1)·bucketMs).
	buckets []dsBucket
	base    int64
	open    *Pass // the pass in progress, if any
	writes  int
	n       int
	// Classifier, when set, lets a pass be read by class (store.ClassPass), as worker 0's
	// Badger store is: the sweep then runs its class merge over the simulated due set. The
	// classes are gathered per pass from the due rows, in memory. A pass lists no hosts
	// (store.HostLister), so the merge never stops for hosts all at their caps: it reads on,
	// and publishes the same set but for rows a capped host refused within a bucket's width of
	// its entries (sweep/classes.go).
	Classifier store.Classifier
}

// dsBucket holds its rows as the sweep reads them, so that a pass hands the sweep slices of
// the bucket itself, and their keys in the bucket's own arena, so that reading a row touches
// memory next to its neighbours' rather than one cache line per key somewhere on the heap.
type dsBucket struct {
	rows   []store.DueRow
	arena  []byte // append-only: a full arena is replaced, never grown, so keys never move
	sorted bool
}

// bucketMs is the width of a due bucket: one minute, so a bucket holds about the rows that
// fall due between two sweeps at the default interval.
const bucketMs = 60_000

// maxSpanBuckets bounds how far apart the earliest and latest due times may lie (about 400
// days): a due time further out is refused rather than allocating a huge bucket array.
const maxSpanBuckets = 400 * 24 * 60

var _ sweep.Store = (*DueSet)(nil)
var _ sweep.Pass = (*Pass)(nil)

// NewDueSet returns an empty due set whose writes lower floor and whose passes advance it.
func NewDueSet(floor store.FloorCell) *DueSet {
	return &DueSet{floor: floor, ids: make(map[string]int32)}
}

// Len is the number of rows.
func (d *DueSet) Len() int { return d.n }

// Writes is the number of schedule writes made through WriteSchedule.
func (d *DueSet) Writes() int { return d.writes }

// ID returns the row id of key: ids are dense, in order of first write, and never reused.
func (d *DueSet) ID(key []byte) (int32, bool) {
	id, ok := d.ids[string(key)]
	return id, ok
}

// DueAt returns the due time of the row with id, or -1 if it has none.
func (d *DueSet) DueAt(id int32) int64 { return d.dues[id] }

// Get returns the row of key.
func (d *DueSet) Get(key []byte) (store.Row, bool) {
	id, ok := d.ids[string(key)]
	if !ok || d.dues[id] < 0 {
		return store.Row{}, false
	}
	due := d.dues[id]
	bk := &d.buckets[bucketOf(due)-d.base]
	for i := range bk.rows {
		if bk.rows[i].DueAtMs == due && bytes.Equal(bk.rows[i].Key, key) {
			return bk.rows[i].Row, true
		}
	}
	return store.Row{}, false
}

// Floor is the floor cell.
func (d *DueSet) Floor() store.FloorCell { return d.floor }

// HeadMs is where the floored scan starts (claim.Scanner): the floor itself. The store keeps a
// head past the guard window because Badger's seek pays for every tombstone in it; a DueSet
// deletes rows outright, so a scan from the floor costs nothing extra and the head would only
// be a second protocol to keep exact.
func (d *DueSet) HeadMs() int64 { return d.floor.Load() }

func bucketOf(dueMs int64) int64 { return dueMs / bucketMs }

// WriteSchedule files sch, replacing the key's row (the funnel's put semantics): the projection's
// stored interval is carried over from the previous row, since a Schedule carries no target.
// It lowers the floor to the new due time before the row becomes visible, as the funnel does.
func (d *DueSet) WriteSchedule(sch store.Schedule) error {
	key := sch.Key()
	switch {
	case len(key) == 0:
		return fmt.Errorf("sim: write schedule: %w", store.ErrEmptyKey)
	case len(key) > store.MaxKeyLen:
		return fmt.Errorf("sim: write schedule: %w", store.ErrKeyTooLong)
	case sch.DueAtMs() < 0:
		return fmt.Errorf("sim: write schedule %q: %w", key, store.ErrNegativeDue)
	case sch.EffectiveIntervalMs() < 0:
		return fmt.Errorf("sim: write schedule %q: %w", key, store.ErrNegativeInterval)
	}
	var stored int64
	if id, ok := d.ids[string(key)]; ok {
		stored = d.stored[id]
	}
	row := sch.Row() // every field a schedule files, StoredIntervalMs carried over as the funnel does
	row.StoredIntervalMs = stored
	if err := d.put(key, row); err != nil {
		return err
	}
	d.writes++
	return nil
}

// RefileIfUnchanged is the store's conditional put (sweep.Store, for the unpin hatch): sch is
// filed only if key's row is exactly was.
func (d *DueSet) RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error) {
	if cur, ok := d.Get(sch.Key()); !ok || cur != was {
		return false, nil
	}
	return true, d.WriteSchedule(sch)
}

// writeID is WriteSchedule for a row the caller knows by id (the simulator's results): the same
// put, without looking the key up.
func (d *DueSet) writeID(id int32, sch store.Schedule) error {
	if sch.DueAtMs() < 0 || sch.EffectiveIntervalMs() < 0 || int(id) >= len(d.keys) || !bytes.Equal(d.keys[id], sch.Key()) {
		return fmt.Errorf("sim: write schedule %q as row %d: invalid", sch.Key(), id)
	}
	row := sch.Row()
	row.StoredIntervalMs = d.stored[id]
	if err := d.putID(id, d.keys[id], row); err != nil {
		return err
	}
	d.writes++
	return nil
}

// Load files a row without counting it as a write: the corpus as it stands at the start.
func (d *DueSet) Load(key []byte, row store.Row) error {
	if len(key) == 0 || len(key) > store.MaxKeyLen || row.DueAtMs < 0 {
		return fmt.Errorf("sim: load %q due %d: invalid row", key, row.DueAtMs)
	}
	return d.put(key, row)
}

func (d *DueSet) put(key []byte, row store.Row) error {
	id, ok := d.ids[string(key)]
	if !ok {
		if len(d.keys) >= math.MaxInt32 {
			return fmt.Errorf("sim: file %q: too many rows", key)
		}
		id = int32(len(d.keys))
		k := bytes.Clone(key)
		d.keys = append(d.keys, k)
		d.dues = append(d.dues, -1)
		d.stored = append(d.stored, 0)
		d.ids[string(k)] = id
	}
	return d.putID(id, d.keys[id], row)
}

func (d *DueSet) putID(id int32, key []byte, row store.Row) error {
	b := bucketOf(row.DueAtMs)
	if err := d.cover(b); err != nil {
		return fmt.Errorf("sim: file %q: %w", key, err)
	}
	// Lower first: the floor must already be at or below the row when it becomes visible.
	d.floor.Lower(row.DueAtMs)
	if d.open != nil {
		d.open.minWritten = min(d.open.minWritten, row.DueAtMs)
	}
	if old := d.dues[id]; old >= 0 {
		d.remove(key, old)
	} else {
		d.n++
	}
	d.dues[id] = row.DueAtMs
	d.stored[id] = row.StoredIntervalMs
	bk := &d.buckets[b-d.base]
	if len(bk.arena)+len(key) > cap(bk.arena) {
		bk.arena = make([]byte, 0, max(512, 2*cap(bk.arena), 2*len(key)))
	}
	bk.arena = append(bk.arena, key...)
	k := bk.arena[len(bk.arena)-len(key) : len(bk.arena) : len(bk.arena)]
	// Appending keeps the bucket sorted when the new row sorts last (the common case: results
	// are filed at now + cadence, after everything already there).
	if n := len(bk.rows); n == 0 {
		bk.sorted = true
	} else if bk.sorted && cmpRow(&bk.rows[n-1], row.DueAtMs, key) > 0 {
		bk.sorted = false
	}
	bk.rows = append(bk.rows, store.DueRow{Key: k, Row: row})
	return nil
}

// cmpRow orders a row against (due, key) as the d/ index does.
func cmpRow(r *store.DueRow, due int64, key []byte) int {
	switch {
	case r.DueAtMs < due:
		return -1
	case r.DueAtMs > due:
		return 1
	}
	return bytes.Compare(r.Key, key)
}

func cmpDueRows(a, b store.DueRow) int { return cmpRow(&a, b.DueAtMs, b.Key) }

// cover grows the bucket array so that it holds bucket b.
func (d *DueSet) cover(b int64) error {
	if len(d.buckets) == 0 {
		d.base = b
		d.buckets = make([]dsBucket, 1, 1024)
		return nil
	}
	switch {
	case b < d.base:
		n := d.base - b
		if n+int64(len(d.buckets)) > maxSpanBuckets {
			return fmt.Errorf("due times span more than %d days", maxSpanBuckets/(24*60))
		}
		d.buckets = append(make([]dsBucket, n, n+int64(len(d.buckets))), d.buckets...)
		d.base = b
	case b >= d.base+int64(len(d.buckets)):
		n := b - d.base + 1
		if n > maxSpanBuckets {
			return fmt.Errorf("due times span more than %d days", maxSpanBuckets/(24*60))
		}
		d.buckets = append(d.buckets, make([]dsBucket, n-int64(len(d.buckets)))...)
	}
	return nil
}

// remove takes key's row, due at dueMs, out of its bucket, keeping the bucket's order.
func (d *DueSet) remove(key []byte, dueMs int64) {
	bk := &d.buckets[bucketOf(dueMs)-d.base]
	for i := range bk.rows {
		if bk.rows[i].DueAtMs == dueMs && bytes.Equal(bk.rows[i].Key, key) {
			bk.rows = slices.Delete(bk.rows, i, i+1)
			return
		}
	}
}

// sortBucket sorts a bucket written out of order, and lays its keys out again in row order in
// one fresh arena: a pass then reads rows and keys as two sequential streams, which the
// processor prefetches, instead of hopping between arenas in the order rows were written.
// A bucket is sorted about once, when it first falls due, so the copy is paid once per row.
func (d *DueSet) sortBucket(bk *dsBucket) {
	if bk.sorted {
		return
	}
	slices.SortFunc(bk.rows, cmpDueRows)
	bk.sorted = true
	n := 0
	for i := range bk.rows {
		n += len(bk.rows[i].Key)
	}
	arena := make([]byte, 0, n+n/4)
	for i := range bk.rows {
		k := bk.rows[i].Key
		arena = append(arena, k...)
		bk.rows[i].Key = arena[len(arena)-len(k) : len(arena) : len(arena)]
	}
	bk.arena = arena
}

// walk visits the rows due in [fromMs, nowMs] in index order, as store's walkDue does, handing
// them to visit in runs (sub-slices of one bucket, at most chunk rows). It stops after maxRows
// rows (0 = no cap), at the first row past nowMs (recorded as the next due time), or at the end.
// Rows below fromMs in fromMs's own bucket are skipped, as the index seek skips them (BelowFloor
// counts them: F1 says there are none).
func (d *DueSet) walk(fromMs, nowMs int64, maxRows, chunk int, visit func([]store.DueRow) error) (st walkStats, err error) {
	first := max(bucketOf(fromMs)-d.base, 0)
	for bi := first; bi < int64(len(d.buckets)); bi++ {
		bk := &d.buckets[bi]
		if len(bk.rows) == 0 {
			continue
		}
		d.sortBucket(bk)
		rows := bk.rows
		if bi == first {
			i, _ := slices.BinarySearchFunc(rows, fromMs, func(r store.DueRow, t int64) int { return cmp.Compare(r.DueAtMs, t) })
			rows = rows[i:]
		}
		end := len(rows)
		if (d.base+bi+1)*bucketMs-1 > nowMs {
			end, _ = slices.BinarySearchFunc(rows, nowMs+1, func(r store.DueRow, t int64) int { return cmp.Compare(r.DueAtMs, t) })
		}
		for len(rows) > 0 {
			n := min(end, chunk)
			if maxRows > 0 && st.rows+n > maxRows {
				n = maxRows - st.rows
			}
			if n > 0 {
				st.warm ^= warm(rows[:n])
				if !st.hasFirstDue {
					st.firstDue, st.hasFirstDue = rows[0].DueAtMs, true
				}
				st.rows += n
				if err := visit(rows[:n]); err != nil {
					return st, err
				}
				rows, end = rows[n:], end-n
			}
			if len(rows) == 0 {
				break
			}
			if end == 0 {
				st.nextDue, st.hasNextDue, st.complete = rows[0].DueAtMs, true, true
				return st, nil
			}
			if maxRows > 0 && st.rows >= maxRows {
				st.capped = true
				return st, nil
			}
		}
	}
	st.complete = true
	return st, nil
}

// warm touches every key of rows before the caller reads them. The loop does nothing else, so
// the processor overlaps its cache misses; the sweep's loop, which does much more per row,
// then finds the keys in cache instead of stalling on each in turn. Over a due set larger than
// the cache it saves about an eighth of the simulator's time.
// It returns a value computed from the keys so that the loads are not optimised away.
func warm(rows []store.DueRow) byte {
	var x byte
	for i := range rows {
		if k := rows[i].Key; len(k) > 0 {
			x ^= k[0] ^ k[len(k)-1]
		}
	}
	return x
}

type walkStats struct {
	warm        byte // warm's result, kept so that its loads happen
	rows        int
	firstDue    int64
	hasFirstDue bool
	nextDue     int64
	hasNextDue  bool
	capped      bool
	complete    bool
}

// ScanDue is the floored index scan (claim.Scanner): the due rows from floorMs up to nowMs, at
// most limit, in index order.
func (d *DueSet) ScanDue(floorMs, nowMs int64, limit int) (store.ScanResult, error) {
	var res store.ScanResult
	if limit <= 0 {
		return res, fmt.Errorf("sim: scan due: %w: limit %d", store.ErrInvalidArgument, limit)
	}
	st, err := d.walk(floorMs, nowMs, limit, limit, func(rows []store.DueRow) error {
		res.Rows = append(res.Rows, rows...) // keys alias arenas that are never overwritten
		return nil
	})
	if err != nil {
		return store.ScanResult{}, fmt.Errorf("sim: scan due from %d: %w", floorMs, err)
	}
	res.FirstDueMs, res.HasFirstDue = st.firstDue, st.hasFirstDue
	res.NextDueMs, res.HasNextDue = st.nextDue, st.hasNextDue
	res.Capped = st.capped
	return res, nil
}

// ScanDueAfter continues a scan strictly after the row (afterMs, afterKey) in (due, key) order,
// as store's does (claim.Scanner).
func (d *DueSet) ScanDueAfter(afterMs int64, afterKey []byte, nowMs int64, limit int) (store.ScanResult, error) {
	var res store.ScanResult
	if limit <= 0 {
		return res, fmt.Errorf("sim: scan due after: %w: limit %d", store.ErrInvalidArgument, limit)
	}
	st, err := d.walk(max(afterMs, 0), nowMs, 0, limit, func(rows []store.DueRow) error {
		for _, r := range rows {
			if r.DueAtMs == afterMs && bytes.Compare(r.Key, afterKey) <= 0 {
				continue
			}
			if len(res.Rows) == limit {
				res.Capped = true
				return errScanFull
			}
			if !res.HasFirstDue {
				res.FirstDueMs, res.HasFirstDue = r.DueAtMs, true
			}
			res.Rows = append(res.Rows, r)
		}
		return nil
	})
	if err != nil && err != errScanFull {
		return store.ScanResult{}, fmt.Errorf("sim: scan due after %d: %w", afterMs, err)
	}
	if !res.Capped {
		res.NextDueMs, res.HasNextDue = st.nextDue, st.hasNextDue
	}
	return res, nil
}

var errScanFull = errors.New("sim: scan page full")

// BelowFloor returns the number of rows due below the floor, and one of them. F1 says it is 0
// whenever no pass is open.
func (d *DueSet) BelowFloor() (n int, example []byte) {
	floor := d.floor.Load()
	last := min(bucketOf(floor)-d.base, int64(len(d.buckets))-1)
	for bi := int64(0); bi <= last; bi++ {
		for _, r := range d.buckets[bi].rows {
			if r.DueAtMs < floor {
				n++
				if example == nil {
					example = r.Key
				}
			}
		}
	}
	return n, example
}

// BeginPass opens a pass at nowMs: the floor it starts from is read now, with the "snapshot"
// (single-threaded, the set itself until the pass closes).
func (d *DueSet) BeginPass(nowMs int64) (sweep.Pass, error) {
	if nowMs < 0 {
		return nil, fmt.Errorf("sim: begin pass: %w: negative now %d", store.ErrInvalidArgument, nowMs)
	}
	if d.open != nil {
		return nil, fmt.Errorf("sim: begin pass: a pass is already open")
	}
	p := &Pass{d: d, minWritten: math.MaxInt64}
	p.stats.NowMs = nowMs
	p.stats.FloorMs = d.floor.Load()
	d.open = p
	return p, nil
}

// Pass is one pass over a DueSet, with *store.Pass's contract.
type Pass struct {
	d          *DueSet
	stats      store.PassStats
	minWritten int64
	iterated   bool
	closed     bool
	classes    map[uint32][]store.DueRow // ClassHeads: the due rows by class, in (due, key) order
}

// IterateDue hands the due rows from the pass's floor up to its now to fn in chunks, in index
// order, reading at most maxRows (0 = no cap). It may be called once.
func (p *Pass) IterateDue(maxRows, chunk int, fn func([]store.DueRow) error) error {
	switch {
	case p.closed:
		return store.ErrClosed
	case p.iterated:
		return store.ErrPassIterated
	case maxRows < 0 || chunk <= 0:
		return fmt.Errorf("sim: iterate due: %w: maxRows %d, chunk %d", store.ErrInvalidArgument, maxRows, chunk)
	}
	p.iterated = true
	st, err := p.d.walk(p.stats.FloorMs, p.stats.NowMs, maxRows, chunk, fn)
	p.stats.Rows = st.rows
	p.stats.FirstDueMs, p.stats.HasFirstDue = st.firstDue, st.hasFirstDue
	p.stats.NextDueMs, p.stats.HasNextDue = st.nextDue, st.hasNextDue
	p.stats.Capped, p.stats.Complete = st.capped, st.complete
	return err // only fn fails: an error from it is returned as is
}

// Stats returns what the pass observed.
func (p *Pass) Stats() store.PassStats { return p.stats }

// AdvanceFloor is store/badgerstore/protocol.go's advance: up to min(first due, now, writes made while the
// pass was open) − guard, by CAS from the floor the pass read.
func (p *Pass) AdvanceFloor(guardMs int64) (int64, bool) {
	f := p.d.floor
	if guardMs < 0 || p.closed || !p.iterated || (!p.stats.HasFirstDue && !p.stats.Complete) {
		return f.Load(), false
	}
	bound := p.stats.NowMs
	if p.stats.HasFirstDue {
		bound = min(bound, p.stats.FirstDueMs)
	}
	bound = min(bound, p.minWritten)
	to := bound - guardMs
	if to <= p.stats.FloorMs || !f.Advance(p.stats.FloorMs, to) {
		return f.Load(), false
	}
	return to, true
}

// Close ends the pass. It is safe to call twice.
func (p *Pass) Close() {
	if !p.closed {
		p.closed = true
		if p.d.open == p {
			p.d.open = nil
		}
	}
}

var _ store.ClassPass = (*Pass)(nil)

// ClassFingerprint implements store.ClassPass.
func (p *Pass) ClassFingerprint() (uint64, bool) {
	if c := p.d.Classifier; c != nil {
		return c.Fingerprint(), true
	}
	return 0, false
}

// ReadHead implements store.ClassPass: the pass's iteration, of one row, and the first due
// time past now.
func (p *Pass) ReadHead() (store.DueRow, bool, error) {
	var first store.DueRow
	var ok bool
	if err := p.IterateDue(1, 1, func(rows []store.DueRow) error {
		first, ok = rows[0], true
		return nil
	}); err != nil {
		return first, false, err
	}
	if p.stats.Capped {
		st, _ := p.d.walk(p.stats.NowMs+1, math.MaxInt64, 1, 1, func([]store.DueRow) error { return nil })
		p.stats.NextDueMs, p.stats.HasNextDue, p.stats.Capped = st.firstDue, st.hasFirstDue, false
	}
	return first, ok, nil
}

// ClassHeads implements store.ClassPass. It groups the pass's due rows by class (keys alias
// the set's arenas, which no write moves).
func (p *Pass) ClassHeads() ([]store.ClassHead, error) {
	c := p.d.Classifier
	switch {
	case p.closed:
		return nil, store.ErrClosed
	case c == nil:
		return nil, fmt.Errorf("sim: class heads: %w: no classifier", store.ErrInvalidArgument)
	}
	p.classes = map[uint32][]store.DueRow{}
	if _, err := p.d.walk(p.stats.FloorMs, p.stats.NowMs, 0, 1<<16, func(rows []store.DueRow) error {
		for _, r := range rows {
			class := c.Class(r.Key, r.Projection)
			p.classes[class] = append(p.classes[class], r)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	heads := make([]store.ClassHead, 0, len(p.classes))
	for class, rows := range p.classes {
		heads = append(heads, store.ClassHead{Class: class, DueRow: rows[0]})
	}
	slices.SortFunc(heads, func(a, b store.ClassHead) int { return cmp.Compare(a.Class, b.Class) })
	return heads, nil
}

// ReadClass implements store.ClassPass.
func (p *Pass) ReadClass(class uint32, afterMs int64, afterKey []byte, n int, dst []store.DueRow) ([]store.DueRow, bool, error) {
	if p.closed {
		return dst, false, store.ErrClosed
	}
	rows := p.classes[class]
	i, found := slices.BinarySearchFunc(rows, store.DueRow{Key: afterKey, Row: store.Row{DueAtMs: afterMs}}, cmpDueRows)
	if found {
		i++
	}
	rows = rows[i:]
	more := len(rows) > n
	if more {
		rows = rows[:n]
	}
	return append(dst, rows...), more, nil
}
