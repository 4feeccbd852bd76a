package badgerstore

import (
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/store"
)

// Compression selects the block compression of Badger's tables.
type Compression uint8

// Compressions.
const (
	// CompressionNone stores blocks as written. Reads then slice the memory-mapped table
	// directly, with no decompression and no block-cache copy: the fastest sweep, and the
	// schedule rows are small, fixed-size and mostly incompressible keys.
	CompressionNone Compression = iota + 1
	// CompressionSnappy is Badger's default: cheap, but every block read decompresses into
	// the block cache.
	CompressionSnappy
	// CompressionZSTD compresses best and costs the most CPU on every block read.
	CompressionZSTD
)

// Ticker is the part of *time.Ticker the maintenance loop uses, so tests can tick by hand.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// NewRealTicker returns a Ticker backed by time.NewTicker. It is the default Options.NewTicker.
func NewRealTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// Options configures a Store. The zero value is usable: Open calls EnsureDefaults, then
// Validate. Sizes are bytes.
//
// The defaults are chosen for worker 0's memory budget (≤ 300 MB RSS with 1,000,000 schedule
// rows; Badger's own defaults reach ~790 MB): see docs/store.md for the measurements behind
// each choice.
type Options struct {
	// SyncWrites fsyncs the value log once per committed batch. Off (the default), an
	// acknowledged write survives kill -9 of the process — the write-ahead value log is a
	// memory-mapped file, so the kernel holds every acknowledged byte — but not a power loss
	// or kernel crash. On, it survives those too, at the cost of one fsync per group-commit
	// batch (measured in docs/store.md).
	SyncWrites bool

	// MemTableSize is the size of one Badger memtable (default 8 MiB; Badger's is 64 MiB).
	// Every funnel write reads the old row through each memtable's skiplist and inserts three
	// entries into the mutable one; both are memory-latency bound, and a small skiplist stays
	// in cache: 8 MiB measured faster than 16, 32 and 64 MiB for bulk load and reschedule
	// (docs/store.md). A transaction holds at most 15 % of it (~1.2 MB, ~12,000 entries),
	// which bounds one group-commit transaction.
	MemTableSize int64
	// NumMemtables is how many memtables may exist at once, the mutable one included
	// (default 3; Badger's is 5). Memtables are the largest fixed cost: NumMemtables ×
	// MemTableSize is allocated whatever the corpus size.
	NumMemtables int
	// NumLevelZeroTables is the L0 table count that triggers compaction into L1 (default 8).
	// NumLevelZeroTablesStall is the count at which writes stall (default 20). Every result
	// rewrites its row and index entries at random keys, so each L0 compaction rewrites the
	// overlapping part of the level below: gathering eight memtables' worth first, not
	// three, should rewrite it about 3/8 as often; measured, the whole queue took 9 % less
	// CPU a job at 1M rows and ran 12 % faster at 50k than with 3 / 10 (docs/store.md).
	NumLevelZeroTables      int
	NumLevelZeroTablesStall int
	// BaseLevelSize is the target size of the first level below L0 (default 32 MiB;
	// Badger's is 10 MiB). Each level below it is ten times larger, so the base level sets
	// how many levels a store of a given size needs and how often a row's rewrite is copied
	// on its way down. An L0 compaction carries eight 8 MiB memtables' worth: into a 10 MiB
	// base level it rewrites that level almost whole every time, and a million rows (about
	// 280 MB of tables) sit three levels deep. Measured with the whole queue, runs
	// alternating on a quiet machine: at 1M rows 10 MiB 16,153–18,326 jobs/s, 32 MiB
	// 18,265–21,675, 64 MiB 18,642–19,437; at 5M 13,175 against 16,104 for 32 MiB; 128 and
	// 256 MiB were no better than 10 (docs/store.md).
	BaseLevelSize int64
	// BlockCacheSize caches decompressed blocks (default 16 MiB). With CompressionNone
	// blocks are read from the memory-mapped table in place and the cache matters little.
	BlockCacheSize int64
	// ReadCacheBytes bounds the read cache (package readcache): the stored values of the rows,
	// targets and pages read most, so that a page crawlers ask for often costs no LSM lookup
	// (default 64 MiB, about ten thousand pages of 6 KB gzipped; negative: none). It is a fixed
	// cost, not one per row.
	ReadCacheBytes int64
	// IndexCacheSize bounds the memory held by table indexes and bloom filters (default 0:
	// keep every table's index in memory, ~15 MB per million rows, faster than a cache miss).
	IndexCacheSize int64
	// NumCompactors is the number of compaction goroutines (default 2, Badger's minimum; the
	// node renders with the rest of its cores).
	NumCompactors int
	// Compression selects block compression (default CompressionNone).
	Compression Compression
	// ValueThreshold is the value size at and above which Badger moves a value into the
	// value log instead of the LSM tree (default 64 B, the least Validate takes). Schedule
	// rows and projections (at most store.RowLen bytes) stay inline, so the sweep's scans
	// never touch the value log; targets and pages go to it. Every result rewrites its
	// target and page: inline, each rewrite is copied again at every level compaction takes
	// it through, which was half of worker 0's CPU at a million rows; in the value log it is
	// written once and rewritten only by GC, when its file is mostly dead.
	ValueThreshold int64
	// ValueLogFileSize is the size of one value-log file (default 256 MiB). GC rewrites one
	// file at a time, so smaller files reclaim space in smaller steps.
	ValueLogFileSize int64

	// MaxBatchWrites caps the writes one group-commit batch gathers from concurrent callers
	// (default 4096). A single call larger than this is still one batch, split into as many
	// transactions as it needs.
	MaxBatchWrites int
	// QueueLen is the number of pending funnel calls buffered ahead of the committer
	// (default 1024); callers beyond it wait.
	QueueLen int

	// RefuseImplausibleDue makes the funnel refuse, with ErrImplausibleDue, a schedule due
	// before MinDueMs or after MaxDueMs. Worker 0 sets it: its due times are wall-clock
	// deadlines, and one in 1970 would pin the floor and be granted before every other row.
	// Off (the default) any non-negative due time is filed, for tests and tools on
	// synthetic clocks.
	RefuseImplausibleDue bool

	// Classifier, when set, makes the store keep the class index a sweep reads instead of
	// the whole due set (classindex.go). Worker 0 passes sweep.NewClassifier of its policy.
	Classifier store.Classifier

	// Floor is the claim-floor cell (default: a fresh MemFloor at 0). Worker 0 passes the
	// shared-memory cell.
	Floor store.FloorCell

	// GCInterval is how often value-log GC runs once StartGC is called (default 10 min).
	// GCDiscardRatio is the fraction of a value-log file that must be garbage before GC
	// rewrites it (default 0.5).
	GCInterval     time.Duration
	GCDiscardRatio float64
	// NewTicker makes the GC ticker (default NewRealTicker). Tests inject a manual one.
	NewTicker func(time.Duration) Ticker

	// Logger receives one line per event (open, close, GC run, reconcile, commit failure,
	// corruption), never one per row. The zero value discards everything. Badger's own
	// messages are forwarded at debug level (warnings and errors at theirs).
	Logger zerolog.Logger

	// Test hooks (set only from _test.go files in this package).
	// TestSignals are hooks for tests; the zero value in production.
	TestSignals store.TestSignals
}

// minValueThreshold is the least ValueThreshold: above the longest schedule row and
// projection, so that they always stay inline (TestValueThresholdKeepsRowsInline).
const minValueThreshold = 64

// EnsureDefaults fills every zero field with its default and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.MemTableSize == 0 {
		o.MemTableSize = 8 << 20
	}
	if o.NumMemtables == 0 {
		o.NumMemtables = 3
	}
	if o.NumLevelZeroTables == 0 {
		o.NumLevelZeroTables = 8
	}
	if o.NumLevelZeroTablesStall == 0 {
		o.NumLevelZeroTablesStall = 20
	}
	if o.BaseLevelSize == 0 {
		o.BaseLevelSize = 32 << 20
	}
	if o.BlockCacheSize == 0 {
		o.BlockCacheSize = 16 << 20
	}
	if o.ReadCacheBytes == 0 {
		o.ReadCacheBytes = 64 << 20
	}
	if o.NumCompactors == 0 {
		o.NumCompactors = 2
	}
	if o.Compression == 0 {
		o.Compression = CompressionNone
	}
	if o.ValueThreshold == 0 {
		o.ValueThreshold = minValueThreshold
	}
	if o.ValueLogFileSize == 0 {
		o.ValueLogFileSize = 256 << 20
	}
	if o.MaxBatchWrites == 0 {
		o.MaxBatchWrites = 4096
	}
	if o.QueueLen == 0 {
		o.QueueLen = 1024
	}
	if o.Floor == nil {
		o.Floor = store.NewMemFloor(0)
	}
	if o.GCInterval == 0 {
		o.GCInterval = 10 * time.Minute
	}
	if o.GCDiscardRatio == 0 {
		o.GCDiscardRatio = 0.5
	}
	if o.NewTicker == nil {
		o.NewTicker = NewRealTicker
	}
	return o
}

// Validate reports the first out-of-range option, wrapping ErrInvalidOptions.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{store.ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.MemTableSize < 1<<20:
		return bad("MemTableSize %d below 1 MiB", o.MemTableSize)
	case o.NumMemtables < 1:
		return bad("NumMemtables %d below 1", o.NumMemtables)
	case o.NumLevelZeroTables < 1 || o.NumLevelZeroTablesStall <= o.NumLevelZeroTables:
		return bad("NumLevelZeroTables %d / NumLevelZeroTablesStall %d: need 1 ≤ tables < stall",
			o.NumLevelZeroTables, o.NumLevelZeroTablesStall)
	case o.BaseLevelSize < 1<<20:
		return bad("BaseLevelSize %d below 1 MiB", o.BaseLevelSize)
	case o.BlockCacheSize < 0 || o.IndexCacheSize < 0:
		return bad("negative cache size")
	case o.Compression < CompressionNone || o.Compression > CompressionZSTD:
		return bad("unknown compression %d", o.Compression)
	case o.Compression != CompressionNone && o.BlockCacheSize == 0:
		return bad("compressed tables need a block cache")
	case o.NumCompactors < 2:
		return bad("NumCompactors %d below 2 (Badger's minimum)", o.NumCompactors)
	case o.ValueThreshold < minValueThreshold || o.ValueThreshold >= (15*o.MemTableSize)/100:
		return bad("ValueThreshold %d outside [%d, 15%% of MemTableSize)", o.ValueThreshold, minValueThreshold)
	case o.ValueLogFileSize < 1<<20 || o.ValueLogFileSize >= 2<<30:
		return bad("ValueLogFileSize %d outside [1 MiB, 2 GiB)", o.ValueLogFileSize)
	case o.MaxBatchWrites < 1 || o.QueueLen < 1:
		return bad("MaxBatchWrites and QueueLen must be ≥ 1")
	case o.Floor == nil || o.NewTicker == nil:
		return bad("nil Floor or NewTicker (call EnsureDefaults)")
	case o.GCInterval < 0:
		return bad("negative GCInterval")
	case o.GCDiscardRatio <= 0 || o.GCDiscardRatio >= 1:
		return bad("GCDiscardRatio %v outside (0, 1)", o.GCDiscardRatio)
	}
	return nil
}

// badgerOptions translates o into Badger's options for dir.
func (o *Options) badgerOptions(dir string) badger.Options {
	comp := options.None
	switch o.Compression {
	case CompressionSnappy:
		comp = options.Snappy
	case CompressionZSTD:
		comp = options.ZSTD
	}
	return badger.DefaultOptions(dir).
		WithSyncWrites(o.SyncWrites).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(o.NumMemtables).
		WithNumLevelZeroTables(o.NumLevelZeroTables).
		WithNumLevelZeroTablesStall(o.NumLevelZeroTablesStall).
		WithBaseLevelSize(o.BaseLevelSize).
		WithBlockCacheSize(o.BlockCacheSize).
		WithIndexCacheSize(o.IndexCacheSize).
		WithNumCompactors(o.NumCompactors).
		WithCompression(comp).
		WithValueThreshold(o.ValueThreshold).
		WithValueLogFileSize(o.ValueLogFileSize).
		// One writer, one committer goroutine: there is nothing for conflict detection to
		// find, and it costs memory per transaction.
		WithDetectConflicts(false).
		// Prometheus-style expvar metrics are not ours; they cost a map update per read.
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{l: o.Logger, inWrite: o.TestSignals.InBadgerWrite})
}

// badgerLogger forwards Badger's messages to zerolog. Badger logs routine compaction and
// flush lines at INFO; they go to debug so that an operator's info stream stays one line per
// freshq event.
type badgerLogger struct {
	l       zerolog.Logger
	inWrite func() // TestSignals.InBadgerWrite
}

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error().Str("component", "badger").Msgf(trimNL(f), a...)
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn().Str("component", "badger").Msgf(trimNL(f), a...)
}
func (b badgerLogger) Infof(f string, a ...any) {
	b.l.Debug().Str("component", "badger").Msgf(trimNL(f), a...)
}
func (b badgerLogger) Debugf(f string, a ...any) {
	if b.inWrite != nil && f == badgerWritingMemtable {
		b.inWrite()
	}
	b.l.Trace().Str("component", "badger").Msgf(trimNL(f), a...)
}

// badgerWritingMemtable is the debug line Badger's writer logs between a transaction's
// value-log write and its memtable write (DB.writeRequests).
const badgerWritingMemtable = "Writing to memtable"

func trimNL(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}
