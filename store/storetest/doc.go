// Package storetest is the conformance suite of the store contract (store.Store, store.Pass):
// one set of tests that every schedule-store backend must pass, run by each backend's own
// tests through Run with an Opener of that backend.
//
// What the suite holds a backend to is what the rest of freshq relies on, and nothing else:
// the funnel's writes and their atomicity, Modify's read-modify-write, the sweep's pass over
// the due index, the floor protocol (F1: after any advance no row is due below the floor nor
// below the head, however writes and passes interleave; the randomized interleaving test
// checks it, and the same test run with store.Mutations.NaiveAdvance must find rows
// stranded, which shows that the checker bites on that backend), scans, pages and Reconcile.
// The mutations exist only in a build with the tag testclock, so the tests that use them run
// through RunMutations, from each backend's test files of that tag (make race runs them).
// How a backend keeps those promises (Badger's in-process critical section, PostgreSQL's row
// locks) is its own business and is tested in its own package.
//
// A few tests must act behind the contract's back (lose a row for Reconcile to restore; read
// the floor that bounds a row on a backend whose floor is per shard): the store an Opener
// returns implements Backdoor for them. The package imports testing and is meant for _test.go
// files only.
package storetest
