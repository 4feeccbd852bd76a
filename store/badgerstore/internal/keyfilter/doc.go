// Package keyfilter is what badgerstore knows, in memory, of the keys that have a schedule row:
// a Bloom filter of them, which lets a funnel write of a key new to the store skip the read of
// the row it would replace, and the hosts of those keys while they are few, which lets a sweep
// stop once every one is capped (store.HostLister).
//
// Invariants. K1: every cacheKey that has a schedule row is in the filter, so a "no" from
// MayHave is certain. H1: the host of every such key is in the host set, or the set is over
// store.MaxListedHosts and says so. Both hold because Build reads every s/ key before the
// funnel's committer starts, and the committer Adds a key when it stages the put that creates
// its row, before the row can be in any snapshot. Nothing is ever removed: both err only
// towards "yes" and towards more hosts, until the next Open rebuilds them. After Build only the
// committer Adds; Hosts may be read from any goroutine.
package keyfilter
