package badgerstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/dueorder"
	"github.com/freshq/freshq/store/badgerstore/internal/funnel"
	"github.com/freshq/freshq/store/badgerstore/internal/keyfilter"
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
	"github.com/freshq/freshq/store/badgerstore/internal/readcache"
)

// Store is the schedule store of one node: a Badger database, its write funnel (package
// funnel) and its scans.
// All methods are safe for concurrent use, except that Close must not race a pass or scan in
// progress.
type Store struct {
	db    *badger.DB
	opts  Options
	log   zerolog.Logger
	floor store.FloorCell

	closed atomic.Bool

	fn   *funnel.Funnel    // the only writer (package funnel)
	keys *keyfilter.Filter // the funnel's; passes read its hosts (StoredHosts)

	// The F1 critical section (protocol.go).
	floorMu  sync.Mutex
	inflight map[*funnel.Batch]int64 // batches registered and not yet acknowledged → min new due
	passes   map[*badgerPass]struct{}
	head     store.MemFloor   // the floor without its guard: where a scan may start (HeadMs)
	classLow map[uint32]int64 // with a classifier: a lower bound of each class's due times (B1)

	// The read view (readview.go): what the Get methods read, never waiting on a commit.
	view       atomic.Pointer[readView]
	viewMu     sync.Mutex // publishers only
	viewClosed bool
	gcRunning  atomic.Int32     // value-log GC runs in progress: reads do not use the view
	rc         *readcache.Cache // the values read most (package readcache); nil: none

	// Maintenance (maintenance.go).
	gcMu   sync.Mutex
	gcStop chan struct{}
	gcDone chan struct{}
}

// Store is a store.Store.
var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir. opts may be nil for the defaults; Open
// works on a copy with EnsureDefaults applied, and returns Validate's error if any. Only one
// process may have a directory open: Badger holds an exclusive lock on it.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	db, err := badger.Open(o.badgerOptions(dir))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s := &Store{
		db:       db,
		opts:     o,
		log:      o.Logger.With().Str("component", "store").Logger(),
		floor:    o.Floor,
		passes:   make(map[*badgerPass]struct{}),
		inflight: make(map[*funnel.Batch]int64),
	}
	s.setHead(o.Floor.Load())
	if err := funnel.OpenIndex(db, o.Classifier, s.log); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	if o.Classifier != nil {
		// B1 from the classes' first rows, before anything can write.
		err := db.View(func(txn *badger.Txn) (err error) {
			s.classLow, err = dueorder.ClassHeadsAt(txn, 0)
			return err
		})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("store: read the class heads: %w", err), db.Close())
		}
	}
	keys, rows, err := keyfilter.Build(db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s.keys = keys
	s.rc = readcache.New(o.ReadCacheBytes)
	s.publishView()
	s.fn = funnel.Start(db, funnel.Config{
		Classifier:           o.Classifier,
		ValueThreshold:       o.ValueThreshold,
		MaxBatchWrites:       o.MaxBatchWrites,
		QueueLen:             o.QueueLen,
		RefuseImplausibleDue: o.RefuseImplausibleDue,
		Signals:              &s.opts.TestSignals,
	}, s.log, (*protocol)(s), keys, s.rc)
	lsm, vlog := db.Size()
	s.log.Info().Str("dir", dir).Bool("sync_writes", o.SyncWrites).
		Int64("lsm_bytes", lsm).Int64("vlog_bytes", vlog).Int("rows", rows).
		Dur("took", time.Since(start)).Msg("store opened")
	return s, nil
}

// Close stops GC, drains the funnel (every call already accepted is committed and
// acknowledged; later calls get ErrClosed), closes passes still open, and closes Badger, which
// flushes its memtables to tables. Close is safe to call twice; the second call returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.StopGC()
	s.fn.Close()

	s.floorMu.Lock()
	open := make([]*badgerPass, 0, len(s.passes))
	for p := range s.passes {
		open = append(open, p)
	}
	s.floorMu.Unlock()
	for _, p := range open {
		p.Close()
	}
	s.closeView()
	s.rc.Close()

	start := time.Now()
	err := s.db.Close()
	if err != nil {
		err = fmt.Errorf("store: close: %w", err)
	}
	s.log.Info().Err(err).Uint64("reads_skipped", s.fn.ReadsSkipped()).Uint64("hints_used", s.fn.HintsUsed()).
		Dur("took", time.Since(start)).Msg("store closed")
	return err
}

// HeadMs is where a scan for due rows may start: no schedule row is due below it. It is kept
// by the floor protocol exactly as the floor is, but without the guard (protocol.go), so it
// is never below the floor and usually at the first due row the last pass observed. A seek
// from the floor skips the tombstones of every row rescheduled out of the guard window; a seek
// from the head does not (docs/store.md, BenchmarkSeekFirstDue). The floor itself stays a
// guard behind, and sweep passes still read from it.
func (s *Store) HeadMs() int64 { return max(s.floor.Load(), s.head.Load()) }

// Floor returns the floor cell the store lowers and its passes advance.
func (s *Store) Floor() store.FloorCell { return s.floor }

// GetSchedule returns the schedule row of cacheKey, or ErrNotFound.
func (s *Store) GetSchedule(cacheKey []byte) (store.Row, error) {
	var r store.Row
	return r, s.get(keyspace.Schedule(cacheKey), cacheKey, "schedule row", r.UnmarshalBinary)
}

// GetTarget returns the target of cacheKey, or ErrNotFound.
func (s *Store) GetTarget(cacheKey []byte) (store.Target, error) {
	var t store.Target
	return t, s.get(keyspace.Target(cacheKey), cacheKey, "target", t.UnmarshalBinary)
}

// GetPage returns the page of cacheKey, or ErrNotFound. The page's body is the caller's.
func (s *Store) GetPage(cacheKey []byte) (store.Page, error) {
	var p store.Page
	return p, s.get(keyspace.Page(cacheKey), cacheKey, "page", p.UnmarshalBinary)
}

// GetPageShared is GetPage whose page body, when the read cache holds the page, is the cached
// value itself (store.SharedPageReader): cached values are never modified, only replaced or
// dropped, so the body stays as read for as long as the caller holds it. The caller must not
// modify it.
func (s *Store) GetPageShared(cacheKey []byte) (store.Page, error) {
	var p store.Page
	if err := store.ValidateKey(cacheKey); err != nil {
		return p, err
	}
	if v, ok := s.rc.Get(keyspace.Page(cacheKey)); ok && !s.closed.Load() {
		if err := p.UnmarshalShared(v); err != nil {
			return store.Page{}, fmt.Errorf("store: get page %q: %w", cacheKey, err)
		}
		return p, nil
	}
	return s.GetPage(cacheKey)
}

func (s *Store) get(k, cacheKey []byte, what string, decode func([]byte) error) error {
	if err := store.ValidateKey(cacheKey); err != nil {
		return err
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	if v, ok := s.rc.Get(k); ok {
		return decode(v)
	}
	gen := s.rc.Generation() // before the view is acquired: package readcache
	read := func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		return item.Value(func(val []byte) error {
			if err := decode(val); err != nil {
				return err
			}
			s.rc.Fill(k, val, gen)
			return nil
		})
	}
	var err error
	if s.gcRunning.Load() > 0 {
		err = s.db.View(read)
	} else if v := s.acquireView(); v == nil {
		return store.ErrClosed
	} else {
		err = read(v.txn)
		v.release()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return store.ErrNotFound
	}
	return fmt.Errorf("store: get %s %q: %w", what, cacheKey, err)
}
