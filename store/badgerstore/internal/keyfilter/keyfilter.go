package keyfilter

import (
	"fmt"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/dgraph-io/badger/v4"

	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"
)

// Filter lets the funnel skip the read of a row that cannot exist. Every funnel write reads
// the row it replaces, to find the index entry to delete; for a key new to the store that read
// is a miss through every memtable and level, and it is most of what a bulk load of new keys
// costs beyond Badger's own writes (docs/store.md).
//
// Invariant K1: every cacheKey that has a schedule row is in the filter. A "no" from MayHave is
// therefore certain and the read can be skipped; a "yes" may be false (about 1 % up to the
// capacity it was sized for, more beyond it) and costs only the read it would have cost
// anyway. K1 holds because the filter is built at Open from every s/ key before the committer
// starts, and the committer adds a key when it stages the put that creates the key's row (a
// put over an existing row finds its key there already). A delete leaves its key in, so the
// filter only ever errs towards "yes". It lives in memory only and is rebuilt, and resized, by
// the next Open.
//
// After Open only the committer goroutine touches it, but for hosts, which passes read
// (hostset.go).
type Filter struct {
	f     *bloom.BloomFilter
	hosts *hostSet // their hosts (hostset.go), built and kept the same way
}

const (
	keyFilterFalsePositive = 0.01
	keyFilterMinCapacity   = 1 << 20 // ~1.2 MB of bits
)

// Build sizes a filter for twice the entries the database holds (an upper bound of
// its schedule rows: every row has an index entry too), at least keyFilterMinCapacity, and
// adds every s/ key from a key-only scan. It returns the number of rows it found.
func Build(db *badger.DB) (*Filter, int, error) {
	var entries uint64
	for _, t := range db.Tables() {
		entries += uint64(t.KeyCount)
	}
	capacity := max(uint(2*entries), keyFilterMinCapacity)
	kf := &Filter{f: bloom.NewWithEstimates(capacity, keyFilterFalsePositive), hosts: newHostSet()}
	rows := 0
	err := db.View(func(txn *badger.Txn) error {
		p := []byte(keyspace.PrefixSchedule)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: p})
		defer it.Close()
		for it.Seek(p); it.Valid(); it.Next() {
			kf.Add(it.Item().Key()[len(p):])
			rows++
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: build key filter: %w", err)
	}
	return kf, rows, nil
}

// Add records that cacheKey may have a schedule row.
func (kf *Filter) Add(cacheKey []byte) {
	kf.f.Add(cacheKey)
	kf.hosts.add(cacheKey)
}

// MayHave reports whether cacheKey may have a schedule row; false is certain (K1).
func (kf *Filter) MayHave(cacheKey []byte) bool { return kf.f.Test(cacheKey) }

// Hosts returns the hosts the store may hold rows of, or false once they passed
// store.MaxListedHosts (H1, hostset.go). The slice is shared: read only.
func (kf *Filter) Hosts() ([]string, bool) { return kf.hosts.hosts() }
