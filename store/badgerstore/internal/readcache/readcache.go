package readcache

import (
	"sync"
	"sync/atomic"

	"github.com/maypok86/otter/v2"
)

// Cache is the read cache: the stored values of the keys read most, so that a page crawlers ask for
// again and again costs no LSM lookup. Serving a page reads two keys (the page and its
// schedule row); with every lookup a binary search per level of tables, those reads were a
// quarter of worker 0's CPU when it served crawlers at 64 connections. Requests follow a
// Zipf law, so a few thousand pages take most of them.
//
// It holds a value's encoding as read, and every Get decodes it as it decodes a value read
// from a table: a caller gets a copy of its own either way, and nothing it does to it reaches
// the cache.
//
// Invariant: a Get returns a value its read view would return, or a newer one, never an
// older one. Every row, target and page is written by the funnel (the class index rebuild
// writes only class keys; a value-log GC moves values without changing them), and the funnel
// brackets each transaction's commit: before it commits, Begin drops every key the
// transaction may write and refuses fills until End, which its completion calls after the
// fresh view is published. A fill is refused as well when any transaction began or ended
// between the moment its reader took the generation (before it acquired its view) and the
// fill. So no value read from a view that lacks a commit is cached once that commit has begun,
// and a view caught up early (a sweep pass's: badgerstore's readview.go) is never contradicted by the cache.
type Cache struct {
	mu       sync.Mutex    // serialises fills against begin and end
	gen      atomic.Uint64 // moved by begin and end
	inflight int           // commits begun and not ended; under mu
	cache    *otter.Cache[string, []byte]
}

// readCacheOverhead is what an entry costs beyond its key and value: the cache's node and
// its share of the hash table.
const readCacheOverhead = 96

// New returns a cache of at most maxBytes of keys and values, or nil (no cache) for
// maxBytes ≤ 0.
func New(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	return &Cache{cache: otter.Must(&otter.Options[string, []byte]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(k string, v []byte) uint32 {
			return uint32(min(len(k)+len(v)+readCacheOverhead, 1<<31))
		},
	})}
}

// Generation is taken by a reader before it acquires its view, and handed to Fill.
func (c *Cache) Generation() uint64 {
	if c == nil {
		return 0
	}
	return c.gen.Load()
}

// Get returns key's cached value. The caller must not modify it.
func (c *Cache) Get(key []byte) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	return c.cache.GetIfPresent(string(key))
}

// Fill caches a copy of val for key, read from a view acquired after generation gen was
// taken, unless a commit began or ended since, or one is in progress.
func (c *Cache) Fill(key, val []byte, gen uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight > 0 || c.gen.Load() != gen {
		return
	}
	// Absent, or present with a value no commit has changed since it was cached (Begin drops
	// a key before its commit): either way the value is current.
	c.cache.SetIfAbsent(string(key), append([]byte(nil), val...))
}

// Begin drops the keys a transaction may write, before it commits, and refuses fills until
// its end.
func (c *Cache) Begin(keys func(yield func([]byte))) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight++
	c.gen.Add(1)
	keys(func(k []byte) { c.cache.Invalidate(string(k)) })
}

// End marks a transaction begun with Begin complete (committed or not), after the view that
// sees it was published.
func (c *Cache) End() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	c.gen.Add(1)
}

// Close stops the cache's goroutines.
func (c *Cache) Close() {
	if c != nil {
		c.cache.StopAllGoroutines()
	}
}
