package funnel

import (
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"

	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore/internal/keyfilter"
	"github.com/freshq/freshq/store/badgerstore/internal/readcache"
)

// Config is what the funnel takes of the store's options.
type Config struct {
	Classifier           store.Classifier // nil: the due index is d/, else c/ (badgerstore's classindex.go)
	ValueThreshold       int64            // Badger's, for the per-transaction accounting (opCost)
	MaxBatchWrites       int
	QueueLen             int
	RefuseImplausibleDue bool
	// Signals are the store's test hooks, read when each batch commits (a benchmark sets
	// BeforeCommit after Open). Never nil.
	Signals *store.TestSignals
}

// Protocol is what the funnel tells its store: the floor protocol's registration of batches
// in flight and the class bounds (badgerstore's protocol.go), and the commits for its read view.
type Protocol interface {
	// BeginBatch registers b, whose earliest new due time is minDue (math.MaxInt64 for a
	// batch of deletes), and lowers the floor to it, before b's first transaction commits.
	BeginBatch(b *Batch, minDue int64)
	// EndBatch unregisters b once all its transactions are done, before its callers are
	// acknowledged.
	EndBatch(b *Batch)
	// LowerClassBounds lowers each class of lows to its due time, before the transaction that
	// files those rows commits (B1).
	LowerClassBounds(lows map[uint32]int64)
	// Committed publishes a read view that sees the transaction just committed. It runs on
	// the transaction's completion, before the next is submitted and before anyone is
	// acknowledged.
	Committed()
}

// Funnel is the write funnel of one store. Its methods are safe for concurrent use; Close
// must be called once, after which every write returns store.ErrClosed.
type Funnel struct {
	db    *badger.DB
	cfg   Config
	log   zerolog.Logger
	proto Protocol
	keys  *keyfilter.Filter // committer-owned (but for its hosts)
	rc    *readcache.Cache  // nil: none

	// sendMu orders sends against Close closing reqs.
	sendMu        sync.RWMutex
	sendClosed    bool
	reqs          chan *request
	committerDone chan struct{}

	pl pipeline // committer-owned
	// readsSkipped counts writes whose row read the key filter proved unnecessary.
	readsSkipped atomic.Uint64
	// hintsUsed counts writes whose row came from a row hint (hints.go).
	hintsUsed atomic.Uint64
	hints     rowHints
}

// Start starts the committer of a funnel over db. keys must already hold every key that has a
// schedule row (keyfilter.Build), and nothing else may write db from now on.
func Start(db *badger.DB, cfg Config, log zerolog.Logger, proto Protocol, keys *keyfilter.Filter, rc *readcache.Cache) *Funnel {
	f := &Funnel{
		db:            db,
		cfg:           cfg,
		log:           log,
		proto:         proto,
		keys:          keys,
		rc:            rc,
		reqs:          make(chan *request, cfg.QueueLen),
		committerDone: make(chan struct{}),
	}
	f.pl.classLows = make(map[uint32]int64)
	go f.commitLoop()
	return f
}

// Close drains the funnel: every call already accepted is committed and acknowledged; later
// calls get store.ErrClosed. It returns once the last transaction has completed.
func (f *Funnel) Close() {
	f.sendMu.Lock()
	f.sendClosed = true
	close(f.reqs)
	f.sendMu.Unlock()
	<-f.committerDone
}

// ReadsSkipped is how many writes skipped the read of their row, the key filter showing it
// could not exist, since Start.
func (f *Funnel) ReadsSkipped() uint64 { return f.readsSkipped.Load() }
