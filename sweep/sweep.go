// Package sweep is worker 0's sweep: every queue.ready.sweep_interval it reads the due set
// (index entries only, never a schedule row), scores the rows with policy, keeps the best
// queue.ready.capacity in a bounded selector, and publishes them into the shared-memory ready
// buffer, from which every worker claims without reading any index.
//
// On a store that keeps the class index for this policy (store.ClassPass, Classifier) the
// sweep reads only what could enter the set: the class merge of classes.go, whose set is the
// full iteration's (TestClassMergePublishesTheFullSet). Otherwise — the simulator, ModeEDF, an
// index built for another configuration, or a PostgreSQL store still holding rows classed under
// another — it iterates the whole due set.
// Result.Rows and Result.Backlog count the rows the sweep read: with the class merge, only
// those, not every due row.
//
// What it publishes: the best queue.ready.capacity rows under the lane shares (policy's
// selector turns away a row the lane order could not publish given what it already holds, so a
// merge reads about K rows, not K per lane), each host within its share of the set (hosts.go,
// hosts.Allowance.EntryCap), and never a row leased at that moment or written since the pass's
// snapshot (Changes, which New refuses to be without). The merge also stops once every host the
// store holds rows of is paused or at its cap (store.HostLister). On Badger each published
// row is handed to the store as a row hint, so that its result need not read it again (RH1,
// store/badgerstore/internal/funnel/hints.go).
//
// # Who owns what
//
// The sweep owns the claim floor (invariant F1, docs/ARCHITECTURE.md). It is the only reader that sees every due row, so
// the first due row it observes is the true minimum, and it is the only code that advances the
// floor. The store makes each advance safe (F1): a pass advances at most to
// min(first due observed, its snapshot time, every write that raced it) − guard, by CAS from the
// floor it read. The sweep adds the liveness half: the floor must not freeze.
//
//	           tick
//	idle ───────────────▶ pass: snapshot + floor ─▶ iterate d/ (score, select)
//	 ▲                                                    │
//	 │                                                    ▼
//	 └── unpin hatch (writes) ◀── publish ◀── advance floor, close iterator
//
// The row at the floor's head pins it. The sweep remembers which row that is and since when,
// warns once when it has pinned the floor for half of claim_floor.unpin_after, and at
// unpin_after runs the unpin hatch: it files the row forward, due now, with the cadence the
// sweep resolved for it, so a row that had no carried cadence becomes self-describing. The
// hatch writes only after the pass's iterator is closed, and only over the row as the pass read
// it (store.Store.RefileIfUnchanged): a write committed since, such as the row's own render
// result, is newer than the pass's picture of the row and stands.
//
// # Failure
//
// A sweep that returns an error or panics is logged and counted; the next tick runs a fresh
// one. No state survives a failed sweep that could stop the next (no latch). While a sweep
// fails, claims go on from the last published set and then from the floored index scan.
//
// queue.ready.enabled: false is read at every sweep: the ready buffer is switched off for every
// process at once, and the sweep keeps only its floor duty (a one-row pass), so the index scan
// the claims fall back to stays flat.
package sweep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Pass is one pass over the due index (store.Pass). The simulator supplies an in-memory one
// with the same contract.
type Pass = store.Pass

// Store is what the sweep needs of the store. FromStore adapts a store.Store.
type Store interface {
	BeginPass(nowMs int64) (Pass, error)
	// RefileIfUnchanged files the schedule only over a row still equal to was (the unpin
	// hatch's write: see store.Store), and reports whether it did.
	RefileIfUnchanged(sch store.Schedule, was store.Row) (bool, error)
}

// FromStore adapts a store to Store. With changes, its writes (the unpin hatch) are
// registered there like every other write of worker 0.
func FromStore(st store.Store, changes *Changes) Store {
	if changes == nil {
		return st
	}
	return changedStore{Store: st, w: changes.Wrap(st)}
}

type changedStore struct {
	store.Store
	w Writer
}

func (c changedStore) RefileIfUnchanged(s store.Schedule, was store.Row) (bool, error) {
	return c.w.RefileIfUnchanged(s, was)
}

// Options wires a Sweeper.
type Options struct {
	Store    Store
	Segment  *shm.Segment
	Worker   *shm.Worker           // worker 0's block: sweep counters
	Policy   func() *policy.Policy // the policy in force: cadence, score, lanes; read once per sweep
	Settings func() *Settings      // the sweep's settings in force; read once per sweep
	Now      func() int64          // ms since the epoch
	Log      zerolog.Logger
	// Changes names the rows written after a pass's snapshot; they are left out of the set it
	// publishes (see Changes). Worker 0 routes every write through Changes.Wrap.
	Changes *Changes
	// Hints, if set, is given every row the sweep publishes, as its pass read it, so that the
	// store can apply the row's result without reading it again (see RowHints). Worker 0 sets
	// it on the embedded store, whose only writer it is.
	Hints RowHints
	// Mode is how the set is selected: policy.ModeLanes (the zero value, production) or, for
	// the simulator's comparisons, ModeScore, ModeEDF or ModeStrict.
	Mode policy.Mode
	// AfterSweep, if set, is called with every sweep's outcome, after it is logged and
	// counted (the worker feeds metrics from it; tests wait on it instead of on time).
	AfterSweep func(Result, error)
}

// RowHints keeps the rows a sweep published, as its pass read them. The sweep hints a row
// before it asks Changes whether a write of the key was in flight at its snapshot or began
// since, and drops the hint when one was; the store must drop a key's hint before every write
// of the key it applies. Then a hint held is the row as stored: a write is in the snapshot, or
// seen by the check, or began after it and dropped the hint itself (badgerstore's RH1).
type RowHints interface {
	HintRow(key []byte, row store.Row)
	DropHint(key []byte)
}

// Settings is what a sweep reads of the configuration besides the policy: whether the ready
// set serves, its size, the rows a pass may read, the floor's guard and unpin hatch, the
// node's render slots and the hosts' limits that shape the set. It is narrowed where the node
// is assembled and read whole once per sweep, so a reload applies to the next one.
type Settings struct {
	ReadyEnabled bool          // queue.ready.enabled: false disables the set (every claim scans the index)
	Capacity     int           // queue.ready.capacity: entries per publish (at most the segment's slot)
	SweepCap     int           // queue.ready.sweep_cap: rows one pass may read before it warns
	FloorGuard   time.Duration // queue.claim_floor.guard
	UnpinAfter   time.Duration // queue.claim_floor.unpin_after
	RenderSlots  int           // the node's renders in flight at most: render workers × render.concurrency
	Hosts        hosts.Limits  // render.hosts
}

// Sweeper runs sweeps. It is used by one goroutine (Run, or a test calling Sweep).
type Sweeper struct {
	opts Options
	pin  pinState
	// The class fingerprint of the last policy seen (classes.go), and the stale index's
	// fingerprint last warned about.
	fpOf       *policy.Policy
	fp         uint64
	staleIndex uint64
	fullPass   bool // tests: read the whole due set even when the class index could serve
	// readOn: tests and benchmarks: the class merge reads on once every host is settled.
	readOn bool
	// The last sweep's selector and the size and shares it was made for (selector).
	sel       *policy.Selector[value]
	selK      int
	selShares policy.Shares
}

// selector returns an empty selector for k and shares: the last sweep's when they are the
// same, so that its heaps' memory is used again rather than grown anew every sweep
// (policy.Selector.Result leaves it empty; the Reset here also empties one a failed or
// panicking sweep left behind).
func (s *Sweeper) selector(k int, shares policy.Shares) *policy.Selector[value] {
	if s.sel == nil || s.selK != k || s.selShares != shares {
		s.sel, s.selK, s.selShares = policy.NewSelector[value](k, s.opts.Mode, shares), k, shares
	}
	s.sel.Reset()
	return s.sel
}

// value is what the selector keeps per admitted row.
type value struct {
	key       []byte
	cadenceMs int64
	host      uint64    // shm.HostHash of the key's host
	row       store.Row // as the pass read it: the entry's flags, and the store's hint (RowHints)
}

// hostHash and owned are what the pass's host shaping (hosts.Shaper) needs of a value: its
// host, and a copy it may keep past the offer (the pass's key is its read buffer).
func (v value) hostHash() uint64 { return v.host }

func (v value) owned() value {
	v.key = bytes.Clone(v.key)
	return v
}

// settledHosts is the class merge's early stop under plans (hosts.Shaper.Settled), for a pass
// that lists the hosts it holds rows of (store.HostLister); nil, and the merge reads on, when
// it cannot.
func settledHosts(plans *hosts.Shaper[value], pass any) func() bool {
	lister, ok := pass.(store.HostLister)
	if !ok {
		return nil
	}
	stored, ok := lister.StoredHosts()
	if !ok {
		return nil
	}
	return plans.Settled(stored)
}

// pinState remembers the row at the floor's head across sweeps.
type pinState struct {
	key     []byte
	dueAtMs int64
	sinceMs int64
	warned  bool
}

// ErrMissingDependency is returned by New when a required option is missing.
var ErrMissingDependency = errors.New("sweep: missing dependency")

// New returns a Sweeper, or ErrMissingDependency naming a required option left out: Store,
// Segment, Policy, Settings, Now and Changes. Changes carries the guarantee that a sweep never
// publishes a row written after its snapshot; where nothing writes beside the sweep (the
// simulator, a test that drives it by hand) the caller passes NewChanges() that no writer
// wraps, and says so.
func New(opts Options) (*Sweeper, error) {
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Store", opts.Store == nil},
		{"Segment", opts.Segment == nil},
		{"Policy", opts.Policy == nil},
		{"Settings", opts.Settings == nil},
		{"Now", opts.Now == nil},
		{"Changes", opts.Changes == nil},
	} {
		if dep.missing {
			return nil, fmt.Errorf("%w: Sweeper needs %s", ErrMissingDependency, dep.name)
		}
	}
	return &Sweeper{opts: opts}, nil
}

// Result describes one sweep.
type Result struct {
	Gen         uint64               // generation published; 0 if nothing was published
	Published   int                  // entries in it
	Rows        int                  // due rows read
	Capped      bool                 // the pass stopped at sweep_cap with more due rows waiting
	LongKeys    int                  // rows skipped: key longer than the ready set's key capacity
	Backlog     [policy.NumLanes]int // due rows read, per lane
	Carried     int                  // rows scored with the cadence they carried
	Resolved    int                  // rows whose cadence was resolved from configuration
	FloorMs     int64                // the floor after the sweep
	Advanced    bool                 // the floor moved up
	NextDueMs   int64                // first not-yet-due time seen; 0 = none
	PinnedKey   []byte               // the row at the floor's head, if any
	PinnedForMs int64                // how long it has been there
	Unpinned    bool                 // the unpin hatch filed it forward
	Disabled    bool                 // queue.ready.enabled was false: nothing published
	// Classes: the sweep read the class index (classes.go), so Rows and Backlog count the
	// rows it read, not every due row. HostsSettled: it stopped early, every host the store
	// holds rows of being paused or at its cap in the set (hosts.Shaper.Settled).
	Classes      bool
	HostsSettled bool
	// Left out of the published set: rows leased (or in their release grace) at publish time,
	// and rows written after the pass's snapshot. Either would be handed out only to be
	// refused, or rendered twice.
	ExcludedLeased  int
	ExcludedChanged int
	// Left out for politeness (hosts.Shaper): rows of a paused host, and rows of a host that
	// already had its share of the set.
	ExcludedHostPaused int
	ExcludedHostCapped int
	// HostResumeMs is when the first pause that left rows out ends (0: none did): the sweep
	// loop sweeps again then, rather than leaving the host's rows out until the next tick.
	HostResumeMs int64
	Duration     time.Duration // wall time of the sweep
}

const chunkRows = 1024

// Sweep runs one sweep. A panic inside it is recovered into an error, so a caller's loop always
// gets to run the next one.
func (s *Sweeper) Sweep(ctx context.Context) (res Result, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sweep: panic: %v\n%s", r, debug.Stack())
		}
		res.Duration = time.Since(start)
		s.record(&res, err)
		if s.opts.AfterSweep != nil {
			s.opts.AfterSweep(res, err)
		}
	}()
	return s.sweep(ctx)
}

func (s *Sweeper) sweep(ctx context.Context) (Result, error) {
	pol, set := s.opts.Policy(), s.opts.Settings()
	now := s.opts.Now()
	enabled := set.ReadyEnabled
	s.opts.Segment.Ready().SetEnabled(enabled)

	s.opts.Changes.sweepBegin() // before the snapshot: a write in flight now is not in it
	defer s.opts.Changes.sweepEnd()
	// The fence version before the snapshot: a shard the node gives up after this point makes
	// every entry of this pass ungrantable (shm.Fence), whatever the pass read of it.
	fenceVersion := s.opts.Segment.Fence().Version()
	pass, err := s.opts.Store.BeginPass(now)
	if err != nil {
		return Result{}, fmt.Errorf("sweep: begin pass: %w", err)
	}
	defer pass.Close()

	layout := s.opts.Segment.Layout()
	keyCap := layout.KeyCapacity
	// The segment was sized when it was created; a reload cannot grow it.
	k := min(set.Capacity, int(layout.ReadyCapacity))
	sel := s.selector(k, pol.Shares())
	plans := hosts.NewShaper(s.opts.Segment, &set.Hosts, k, set.RenderSlots, now, value.hostHash, value.owned)
	res := Result{Disabled: !enabled}
	var head floorHead
	maxRows := set.SweepCap
	if !enabled {
		maxRows = 1 // only the floor's head is needed
	}
	var pr policy.Row
	// consider scores one due row and offers it to the set, as both ways of reading do.
	consider := func(r *store.DueRow) {
		pr = *r
		cadence, origin := pol.Cadence(&pr)
		if origin.Carried() {
			res.Carried++
		} else {
			res.Resolved++
		}
		head.note(r, pr, cadence)
		if !enabled {
			return
		}
		if len(r.Key) > int(keyCap) {
			res.LongKeys++ // claimable only through the index scan; never truncated
			return
		}
		lane := policy.LaneOf(&pr)
		res.Backlog[lane]++
		score := pol.Score(&pr, pol.RankInterval(&pr, cadence), now)
		if !sel.Admits(lane, score, r.DueAtMs) {
			return
		}
		host, plan := plans.Of(r.Key)
		switch {
		case plan.PausedUntil > now:
			res.ExcludedHostPaused++
			if res.HostResumeMs == 0 || plan.PausedUntil < res.HostResumeMs {
				res.HostResumeMs = plan.PausedUntil
			}
			return
		case plan.Full():
			res.ExcludedHostCapped++
			plans.Refuse(plan, s.opts.Mode, lane, score, r.DueAtMs, value{key: r.Key, cadenceMs: cadence, host: host, row: r.Row})
			return
		}
		kept, evicted, ok := sel.OfferEvict(lane, score, r.DueAtMs, value{key: bytes.Clone(r.Key), cadenceMs: cadence, host: host, row: r.Row})
		if kept {
			plan.Hold()
		}
		if ok {
			plans.Release(evicted.host)
		}
	}
	var stats store.PassStats
	if cp, ok := s.classPass(pass, pol, enabled); ok {
		res.Classes = true
		stats, res.HostsSettled, err = s.readByClass(ctx, cp, pol, plans, now, maxRows, sel, &head, consider)
	} else {
		err = pass.IterateDue(maxRows, chunkRows, func(due []store.DueRow) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			for i := range due {
				consider(&due[i])
			}
			return nil
		})
		stats = pass.Stats()
	}
	if err != nil {
		return res, fmt.Errorf("sweep: iterate: %w", err)
	}
	res.Rows, res.Capped = stats.Rows, stats.Capped && enabled
	plans.ReportDemand() // the rows due per host, for the division of the hosts' limits in a cluster
	res.FloorMs, res.Advanced = pass.AdvanceFloor(set.FloorGuard.Milliseconds())
	pass.Close() // the iterator and snapshot are released before anything below writes

	s.recordFloor(stats, now, &res)

	if enabled {
		items := sel.Result()
		plans.Promote(items, s.opts.Mode) // a row promoted displaces one: as many are left out
		items = plans.Spread(items)
		pub := s.opts.Segment.Ready().Publish(s.readyEntries(items, fenceVersion, now, &res), now)
		res.Gen, res.Published = pub.Gen, pub.Published
	}
	return res, s.followPin(&head, set, now, &res)
}

// readByClass reads a pass through the class index: the floor's head first, from the due
// index (the true first due row), then the classes' heads, leaving out the hosts whose
// plans are settled (unless the sweep is told to read on).
func (s *Sweeper) readByClass(ctx context.Context, cp store.ClassPass, pol *policy.Policy, plans *hosts.Shaper[value], now int64, maxRows int, sel *policy.Selector[value], head *floorHead, consider func(*store.DueRow)) (store.PassStats, bool, error) {
	first, ok, err := cp.ReadHead()
	if err != nil {
		return store.PassStats{}, false, err
	}
	if ok {
		cadence, _ := pol.Cadence(&first)
		head.note(&first, first, cadence)
	}
	settled := settledHosts(plans, cp)
	if s.readOn {
		settled = nil
	}
	return readClasses(ctx, cp, pol.Boost(), now, maxRows, sel, settled, consider)
}

// recordFloor tells the segment's claim floor what the pass found: the next due time, and
// when the floor last advanced.
func (s *Sweeper) recordFloor(stats store.PassStats, now int64, res *Result) {
	floor := s.opts.Segment.Floor()
	if stats.HasNextDue {
		res.NextDueMs = stats.NextDueMs
	}
	floor.SetNextDue(res.NextDueMs)
	if res.Advanced {
		floor.SetAdvancedAt(now)
	}
}

// floorHead is the earliest due row a pass read: the row that holds the claim floor.
type floorHead struct {
	key     []byte
	row     policy.Row
	stored  store.Row // as the pass read it: the unpin hatch files only over this
	cadence int64
	ok      bool
}

// note keeps r if it comes before the head so far. The head is the earliest row: the first
// one, from a backend that iterates in due order (store.Pass), but any backend may hand over
// rows in its own order.
func (h *floorHead) note(r *store.DueRow, pr policy.Row, cadence int64) {
	if !h.ok || r.DueAtMs < h.stored.DueAtMs || r.DueAtMs == h.stored.DueAtMs && bytes.Compare(r.Key, h.key) < 0 {
		h.key, h.row, h.stored, h.cadence, h.ok = bytes.Clone(r.Key), pr, r.Row, cadence, true
		h.row.Key = h.key
	}
}

// readyEntries are the selected items the ready set may hold: not a row leased now, nor one
// written since the pass's snapshot (its score may be stale). Each carries the fence version
// read before the snapshot.
func (s *Sweeper) readyEntries(items []policy.Item[value], fenceVersion uint32, now int64, res *Result) []shm.Entry {
	entries := make([]shm.Entry, 0, len(items))
	leases := s.opts.Segment.Leases()
	for _, it := range items {
		h := shm.KeyHash(it.Value.key)
		if _, held := leases.Lookup(h, now); held {
			res.ExcludedLeased++
			continue
		}
		if s.opts.Hints != nil {
			s.opts.Hints.HintRow(it.Value.key, it.Value.row) // before the check: see RowHints
		}
		if s.opts.Changes.changedSince(h) {
			if s.opts.Hints != nil {
				s.opts.Hints.DropHint(it.Value.key)
			}
			res.ExcludedChanged++
			continue
		}
		entries = append(entries, shm.Entry{Score: it.Score, DueAtMs: it.DueAtMs, CadenceMs: it.Value.cadenceMs,
			Submitted: it.Value.row.Submitted, Checkable: it.Value.row.Checkable, Lane: uint8(it.Lane), Key: it.Value.key,
			Fence: fenceVersion})
	}
	return entries
}

// followPin records how long the floor's head has held the claim floor, warns at half of
// sweep.unpin_after, and files the row forward (unpin) once it has held it that long.
func (s *Sweeper) followPin(head *floorHead, set *Settings, now int64, res *Result) error {
	floor := s.opts.Segment.Floor()
	if !head.ok {
		s.pin = pinState{}
		floor.SetPin(0, 0)
		return nil
	}
	if !bytes.Equal(s.pin.key, head.key) || s.pin.dueAtMs != head.row.DueAtMs {
		s.pin = pinState{key: head.key, dueAtMs: head.row.DueAtMs, sinceMs: now}
	}
	floor.SetPin(shm.KeyHash(head.key), s.pin.sinceMs)
	res.PinnedKey, res.PinnedForMs = head.key, now-s.pin.sinceMs
	unpinAfter := set.UnpinAfter.Milliseconds()
	if res.PinnedForMs >= unpinAfter/2 && !s.pin.warned {
		s.pin.warned = true
		s.opts.Log.Warn().Str("key", string(head.key)).Int64("due_ms", head.row.DueAtMs).
			Dur("pinned_for", time.Duration(res.PinnedForMs)*time.Millisecond).
			Dur("unpin_after", set.UnpinAfter).
			Msg("a row has held the claim floor for half of unpin_after; it will be filed forward")
	}
	if res.PinnedForMs >= unpinAfter {
		filed, err := s.unpin(&head.row, head.stored, head.cadence, now)
		if err != nil {
			return err
		}
		res.Unpinned = filed
		s.pin = pinState{}
	}
	return nil
}

// unpin files the row at the floor's head forward: due now, with the cadence the sweep
// resolved, keeping its source and lane inputs. It writes only over the row as the pass read
// it (was): if anything wrote the row since, that write is newer and stands, and the row no
// longer holds the floor where the pass saw it. It reports whether it filed the row.
func (s *Sweeper) unpin(r *policy.Row, was store.Row, cadenceMs, now int64) (bool, error) {
	sch, err := store.NewSchedule(r.Key, now, r.Submitted, cadenceMs,
		store.Lanes{Urgent: r.Urgent, NeverRendered: r.NeverRendered, Failing: r.Failing})
	if err != nil {
		return false, fmt.Errorf("sweep: unpin %q: %w", r.Key, err)
	}
	filed, err := s.opts.Store.RefileIfUnchanged(sch, was)
	if err != nil {
		return false, fmt.Errorf("sweep: unpin %q: %w", r.Key, err)
	}
	if !filed {
		s.opts.Log.Info().Str("key", string(r.Key)).Int64("was_due_ms", r.DueAtMs).
			Msg("unpin hatch: the row was written after the sweep read it; that write stands")
		return false, nil
	}
	s.opts.Log.Warn().Str("key", string(r.Key)).Int64("was_due_ms", r.DueAtMs).Int64("cadence_ms", cadenceMs).
		Msg("unpin hatch: filed the row holding the claim floor forward to now")
	return true, nil
}

// record logs a sweep (one line) and updates worker 0's counters.
func (s *Sweeper) record(res *Result, err error) {
	w := s.opts.Worker
	if err != nil {
		if w != nil {
			w.Add(shm.CounterSweepFailures, 1)
		}
		if !errors.Is(err, context.Canceled) {
			s.opts.Log.Error().Err(err).Msg("sweep failed; the next tick retries")
		}
		return
	}
	if w != nil {
		w.Add(shm.CounterSweeps, 1)
		w.Set(shm.CounterSweepMicros, uint64(res.Duration.Microseconds()))
		w.Set(shm.CounterSweepRows, uint64(res.Rows))
		w.Add(shm.CounterCadenceCarried, uint64(res.Carried))
		w.Add(shm.CounterCadenceResolved, uint64(res.Resolved))
		if res.Capped {
			w.Add(shm.CounterSweepCapped, 1)
		}
		if !res.Disabled {
			for lane, n := range res.Backlog {
				w.Set(shm.CounterBacklog+shm.Counter(lane), uint64(n))
			}
		}
	}
	switch {
	case res.Capped && res.Classes:
		s.opts.Log.Warn().Int("rows", res.Rows).
			Msg("sweep stopped at sweep_cap: the class merge reads in rank order, so the rows left unranked are the lowest ranked; raise sweep_cap")
	case res.Capped:
		s.opts.Log.Warn().Int("rows", res.Rows).
			Msg("sweep stopped at sweep_cap: the index is ascending, so the recently-due rows went unranked")
	}
	s.opts.Log.Debug().Uint64("gen", res.Gen).Int("published", res.Published).Int("rows", res.Rows).
		Int("carried", res.Carried).Int("resolved", res.Resolved).Int64("floor_ms", res.FloorMs).
		Bool("advanced", res.Advanced).Bool("classes", res.Classes).Bool("hosts_settled", res.HostsSettled).
		Dur("took", res.Duration).Msg("sweep")
}

// Run sweeps on every tick until ctx is done. A failed sweep is logged by Sweep; Run only goes
// on to the next tick.
func (s *Sweeper) Run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			s.Sweep(ctx)
		}
	}
}
