// Package readcache is badgerstore's read cache: the stored values (encoded, as read) of the
// schedule rows, targets and pages read most, bounded by bytes, so that a page crawlers ask for
// again and again costs no LSM lookup.
//
// Invariant: a store read that goes through the cache returns a value its read view would
// return, or a newer one, never an older one. The funnel brackets every commit with Begin
// (drop the keys it may write, refuse fills) and End (after the fresh view is published), and a
// Fill is refused unless no commit began or ended since its reader took the Generation. A nil
// *Cache is no cache: every method is a no-op or a miss. Cached values are never modified,
// only replaced or dropped, so a caller may hold one; it must not modify it.
package readcache
