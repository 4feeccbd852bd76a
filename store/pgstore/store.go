package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/pgstore/pgschema"
)

// Defaults and bounds of Options.
const (
	// DefaultShards is S for a new schema: enough shards that a cluster of tens of nodes gets
	// an even share each, few enough that a pass's per-shard reads stay cheap.
	DefaultShards = 256
	MaxShards     = 1 << 16
	// DefaultMaxBatchWrites bounds one group-commit transaction.
	DefaultMaxBatchWrites = 4096
	// DefaultQueueLen is the funnel's request queue.
	DefaultQueueLen = 1024
)

// Options configures Open. The zero value is usable.
type Options struct {
	// Shards is S, used only when Open creates the schema; an existing schema keeps its own.
	Shards int
	// Floor is the node's floor cell that writes lower and advances raise (the minimum over
	// the shards); nil is an in-process store.MemFloor.
	Floor store.FloorCell
	// RefuseImplausibleDue refuses puts due outside [store.MinDueMs, store.MaxDueMs], as the
	// Badger store's option of the same name.
	RefuseImplausibleDue bool
	MaxBatchWrites       int
	QueueLen             int
	Logger               zerolog.Logger
	// Node is the node's identity in a cluster (config node.id). Empty: the store is alone on
	// its database and works on every shard. Set: it works only on the shards SetOwned gives
	// it (none before the first call), each fenced by its lease's epoch in the transaction that
	// uses it: a pass reads, an advance raises, and a result (Modify) is applied only for a
	// shard the node still holds. Writes (WriteSchedules, DeleteTarget, …) go to any shard,
	// and lower that shard's own floor, whichever node executes them.
	Node string
	// IdleInTransaction, when positive, ends any transaction of this store's connections that
	// stays idle longer (PostgreSQL's idle_in_transaction_session_timeout). A node that is
	// paused (SIGSTOP) or cut off keeps the row locks of its open transactions: the lease rows
	// it holds FOR SHARE would stop every other node from taking its shards. Set below the
	// cluster's lease TTL, the database ends them before the shards are due to move.
	IdleInTransaction time.Duration
	// Fenced, when set, is told of what the fence refused: floor advances of shards the node
	// no longer held (FencedAdvance) and results of such shards (FencedResult).
	Fenced func(what Fenced, n int)
	// Classifier, when set, is the sweep's classifier: the store files every row with its
	// class and its passes read by class (classindex.go), and a background loop moves rows
	// classed under another configuration into this one's. Only worker 0, the node's one
	// sweeper and writer, sets it.
	Classifier store.Classifier
	// TestNoReclassifyLoop keeps Open from starting the reclassifier's loop: a test runs
	// Reclassify itself.
	TestNoReclassifyLoop bool
	// TestSignals are hooks for tests, zero in production. BeforeCommit runs once a batch's
	// transaction has locked its shards, lowered their floors and staged its writes, just
	// before it commits; AfterGC never runs. In a test build (tag testclock) their Mutations
	// break the protocol: NaiveAdvance advances without the locks, FloorOnWriter lowers the
	// writer's floor instead of the row's.
	TestSignals store.TestSignals
	// TestTracer, when set, is told of every statement the store's connections run: a test
	// counts statements with it. nil in production.
	TestTracer pgx.QueryTracer
}

// Store is the PostgreSQL store. All methods are safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	log    zerolog.Logger
	shards int
	floor  store.FloorCell
	head   atomic.Int64 // the floor without its guard, as the last advance left it, lowered by writes
	// lastDue is how many rows the last pass found due (at least): it tells the next pass
	// whether its cap may bind (IterateDue).
	lastDue atomic.Int64
	// scanRereads counts the claim path's scans whose first, narrow read of each shard was not
	// enough to merge them exactly (scanShards), for the tests.
	scanRereads atomic.Uint64

	// allShards and zeroEpochs are every shard, for a store outside a cluster (ownedSet).
	allShards  []int32
	zeroEpochs []int64
	owned      atomic.Pointer[Owned] // a cluster's shards (SetOwned); nil: none yet

	// classEpoch is the class epoch of Options.Classifier (classindex.go), fixed at Open; 0
	// without one. stopReclassify ends its loop, which closes reclassifyDone.
	classEpoch     int64
	stopReclassify context.CancelFunc
	reclassifyDone chan struct{}
	// stopVacuum ends the schedule table's vacuum loop (vacuum.go), which closes vacuumDone;
	// worker 0's store runs it, beside the reclassifier.
	stopVacuum context.CancelFunc
	vacuumDone chan struct{}
	// testBeforeReclassifyUpdate runs between a reclassifier batch's read and its update
	// (export_test.go); nil in production.
	testBeforeReclassifyUpdate func()

	closed        atomic.Bool
	passMu        sync.Mutex
	passes        map[*pass]struct{} // open passes, which Close closes; guarded by passMu
	sendMu        sync.RWMutex
	sendClosed    bool
	reqs          chan *request
	committerDone chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn, migrates its schema, and starts the funnel.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Shards == 0 {
		o.Shards = DefaultShards
	}
	if o.Shards < 1 || o.Shards > MaxShards {
		return nil, fmt.Errorf("%w: shards %d, must be 1..%d", store.ErrInvalidArgument, o.Shards, MaxShards)
	}
	if o.MaxBatchWrites <= 0 {
		o.MaxBatchWrites = DefaultMaxBatchWrites
	}
	if o.QueueLen <= 0 {
		o.QueueLen = DefaultQueueLen
	}
	if o.Floor == nil {
		o.Floor = store.NewMemFloor(0)
	}
	start := time.Now()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: dsn: %w", err)
	}
	if o.IdleInTransaction > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(max(1, o.IdleInTransaction.Milliseconds()), 10)
	}
	if o.TestTracer != nil {
		cfg.ConnConfig.Tracer = o.TestTracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	shards, err := pgschema.Migrate(ctx, pool, o.Shards)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{
		pool:          pool,
		opts:          o,
		log:           o.Logger.With().Str("component", "store").Str("backend", "postgres").Logger(),
		shards:        shards,
		floor:         o.Floor,
		passes:        map[*pass]struct{}{},
		reqs:          make(chan *request, o.QueueLen),
		committerDone: make(chan struct{}),
	}
	for sh := range int32(shards) {
		s.allShards = append(s.allShards, sh)
	}
	s.zeroEpochs = make([]int64, shards)
	// The cell starts at the lowest shard floor: the database is the truth, the cell its
	// mirror for this node's claim path.
	var minFloor int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(min(floor_ms), 0) FROM freshq_floor`).Scan(&minFloor); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: read the floors: %w", err)
	}
	s.floor.Lower(minFloor)
	if s.floor.Load() < minFloor {
		s.floor.Advance(s.floor.Load(), minFloor)
	}
	s.head.Store(minFloor)
	if o.Classifier != nil {
		if s.classEpoch, err = claimClassEpoch(ctx, pool, o.Classifier.Fingerprint()); err != nil {
			pool.Close()
			return nil, err
		}
	}
	go s.commitLoop()
	if s.classEpoch != 0 && !o.TestNoReclassifyLoop {
		var rctx context.Context
		rctx, s.stopReclassify = context.WithCancel(context.Background())
		s.reclassifyDone = make(chan struct{})
		go s.reclassifyLoop(rctx, s.reclassifyDone)
	}
	if s.classEpoch != 0 {
		var vctx context.Context
		vctx, s.stopVacuum = context.WithCancel(context.Background())
		s.vacuumDone = make(chan struct{})
		go s.vacuumLoop(vctx, s.vacuumDone)
	}
	s.log.Info().Int("shards", shards).Int("schema_version", pgschema.Version()).Int64("class_epoch", s.classEpoch).
		Dur("took", time.Since(start)).Msg("store opened")
	return s, nil
}

// Fenced names what the fence of a cluster refused (Options.Fenced).
type Fenced uint8

const (
	FencedAdvance Fenced = iota // a shard's floor advance: the node no longer held the shard
	FencedResult                // a result (Modify) of a key whose shard the node no longer held
)

func (s *Store) fenced(what Fenced, n int) {
	if n > 0 && s.opts.Fenced != nil {
		s.opts.Fenced(what, n)
	}
}

// Shards is S, the number of shards keys hash into.
func (s *Store) Shards() int { return s.shards }

// ShardOf is the shard of cacheKey in this store: Shard(cacheKey, Shards()).
func (s *Store) ShardOf(cacheKey []byte) int32 { return Shard(cacheKey, s.shards) }

// Pool is the store's connections, for the package that keeps a cluster's own tables on the
// same database (pgcluster). It writes none of the store's tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Closed reports whether Close was called: a reader on Pool then answers store.ErrClosed.
func (s *Store) Closed() bool { return s.closed.Load() }

// Shard is the shard of cacheKey among shards: xxhash64 of the key, mod shards.
func Shard(cacheKey []byte, shards int) int32 {
	return int32(xxhash.Sum64(cacheKey) % uint64(shards))
}

// Close drains the funnel, closes the passes still open (each holds a connection, which the
// pool would wait for), then closes the connections. Safe to call twice. It must not be called
// while a pass is in use in another goroutine.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopReclassify != nil {
		s.stopReclassify()
		<-s.reclassifyDone
	}
	if s.stopVacuum != nil {
		s.stopVacuum()
		<-s.vacuumDone
	}
	s.sendMu.Lock()
	s.sendClosed = true
	close(s.reqs)
	s.sendMu.Unlock()
	<-s.committerDone
	s.passMu.Lock()
	open := make([]*pass, 0, len(s.passes))
	for p := range s.passes {
		open = append(open, p)
	}
	s.passMu.Unlock()
	for _, p := range open {
		p.Close()
	}
	s.pool.Close()
	s.log.Info().Msg("store closed")
	return nil
}

// HeadMs implements store.Store: the last advance's first due row (or now), lowered by every
// write of this node since, and never below the floor.
func (s *Store) HeadMs() int64 { return max(s.floor.Load(), s.head.Load()) }

// StartGC implements store.Store: PostgreSQL's autovacuum does this work.
func (s *Store) StartGC() {}

// StopGC implements store.Store.
func (s *Store) StopGC() {}

// GetSchedule implements store.Store.
func (s *Store) GetSchedule(cacheKey []byte) (store.Row, error) {
	if err := s.readable(cacheKey); err != nil {
		return store.Row{}, err
	}
	var r rowCols
	err := s.pool.QueryRow(context.Background(),
		`SELECT due_at_ms, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms FROM freshq_schedule WHERE cache_key = $1`,
		cacheKey).Scan(&r.due, &r.flags, &r.eff, &r.stored, &r.rank)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Row{}, store.ErrNotFound
	}
	if err != nil {
		return store.Row{}, fmt.Errorf("pgstore: get schedule row %q: %w", cacheKey, err)
	}
	return r.row()
}

// GetTarget implements store.Store.
func (s *Store) GetTarget(cacheKey []byte) (store.Target, error) {
	var t store.Target
	return t, s.getValue("freshq_target", cacheKey, t.UnmarshalBinary)
}

// GetPage implements store.Store. The page's body is the caller's.
func (s *Store) GetPage(cacheKey []byte) (store.Page, error) {
	var p store.Page
	return p, s.getValue("freshq_page", cacheKey, p.UnmarshalBinary)
}

func (s *Store) getValue(table string, cacheKey []byte, decode func([]byte) error) error {
	if err := s.readable(cacheKey); err != nil {
		return err
	}
	var v []byte
	err := s.pool.QueryRow(context.Background(), `SELECT value FROM `+table+` WHERE cache_key = $1`, cacheKey).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("pgstore: get %s %q: %w", table, cacheKey, err)
	}
	if err := decode(v); err != nil {
		return fmt.Errorf("pgstore: get %s %q: %w", table, cacheKey, err)
	}
	return nil
}

func (s *Store) readable(cacheKey []byte) error {
	if err := store.ValidateKey(cacheKey); err != nil {
		return err
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// ForEachSchedule implements store.Store, from one snapshot. Its query reads the prefix's
// range to its end once started, whenever fn stops: ListSchedule is the bounded read.
func (s *Store) ForEachSchedule(prefix []byte, fn func(key []byte, row store.Row) error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	q, args := scheduleRangeQuery(prefix, nil, 0)
	return s.eachScheduleRow(context.Background(), prefix, q, args, fn)
}

// ListSchedule implements store.Store: one query whose bounds on cache_key are a range of the
// table's primary key, read in its order and stopped at the LIMIT. Its plan is an index scan of
// that range (TestListScheduleIsAnIndexRangeScan): a page costs limit rows wherever after lies.
func (s *Store) ListSchedule(ctx context.Context, prefix, after []byte, limit int) ([]store.KeyRow, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if limit <= 0 {
		return nil, fmt.Errorf("pgstore: list schedule: limit %d: %w", limit, store.ErrInvalidArgument)
	}
	q, args := scheduleRangeQuery(prefix, after, limit)
	out := make([]store.KeyRow, 0, min(limit, 256))
	err := s.eachScheduleRow(ctx, prefix, q, args, func(key []byte, row store.Row) error {
		out = append(out, store.KeyRow{Key: key, Row: row}) // pgx scans each bytea into a new slice
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scheduleRangeQuery selects the schedule rows of prefix after after (nil: none), in key order,
// at most limit (0: all). Its lower bound is one predicate, the tighter of cache_key >= prefix
// and cache_key > after (a cursor below the prefix bounds nothing); its upper bound is the
// prefix's successor, absent when the prefix is empty or all 0xff bytes.
func scheduleRangeQuery(prefix, after []byte, limit int) (string, []any) {
	q, args := `SELECT cache_key, due_at_ms, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms FROM freshq_schedule WHERE true`, []any{}
	cond := func(op string, v any) {
		args = append(args, v)
		q += ` AND cache_key ` + op + ` $` + strconv.Itoa(len(args))
	}
	if after != nil && bytes.Compare(after, prefix) >= 0 {
		cond(`>`, after)
	} else if len(prefix) > 0 {
		cond(`>=`, prefix)
	}
	if end, ok := store.PrefixEnd(prefix); ok {
		cond(`<`, end)
	}
	q += ` ORDER BY cache_key`
	if limit > 0 {
		args = append(args, limit)
		q += ` LIMIT $` + strconv.Itoa(len(args))
	}
	return q, args
}

// eachScheduleRow runs a scheduleRangeQuery and calls fn for each row, until fn returns an error.
func (s *Store) eachScheduleRow(ctx context.Context, prefix []byte, q string, args []any, fn func(key []byte, row store.Row) error) error {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("pgstore: schedule rows of %q: %w", prefix, err)
	}
	defer rows.Close()
	var r rowCols
	for rows.Next() {
		var key []byte
		if err := rows.Scan(&key, &r.due, &r.flags, &r.eff, &r.stored, &r.rank); err != nil {
			return fmt.Errorf("pgstore: schedule rows of %q: %w", prefix, err)
		}
		row, err := r.row()
		if err != nil {
			return fmt.Errorf("pgstore: schedule row %q: %w", key, err)
		}
		if err := fn(key, row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: schedule rows of %q: %w", prefix, err)
	}
	return nil
}

// rowCols is a schedule row as its columns hold it.
type rowCols struct {
	due, eff, stored, rank int64
	flags                  int16
}

func (r rowCols) row() (store.Row, error) {
	if r.flags < 0 || r.flags > 0xff {
		return store.Row{}, fmt.Errorf("%w: flags %d", store.ErrCorruption, r.flags)
	}
	if r.due < 0 {
		return store.Row{}, fmt.Errorf("%w: negative due time %d", store.ErrCorruption, r.due)
	}
	p, err := store.ProjectionOf(byte(r.flags), r.eff, r.stored, r.rank)
	return store.Row{DueAtMs: r.due, Projection: p}, err
}
