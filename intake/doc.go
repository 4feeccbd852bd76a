// Package intake is worker 0's targets service and what its write services share: what the
// HTTP handlers of package api call to change the stored targets and to read them for the
// operator. Targets files and changes targets (Upsert, an upload's items through an Upload, a
// sitemap run's UpsertChunk, Discover, Prioritize for rush and wait, Delete, the key
// migration MigrateKeys and Reschedule) and reads one (Explain, Page, Stored, Validators);
// Demand writes the crawler requests counted into the targets' request
// counters. KeyLocks are the per-key locks every writer of worker 0 shares (the applier, in
// package apply, included), Writer is the funnel's writes they make, and errors.go holds the
// sentinel errors (ErrNotFound, ErrStore, ErrClosed, ErrTooMany, ErrLeaseNotHeld,
// ErrBadStoredPage, ErrOverloaded, ErrStopping, ErrWaitTimeout, ErrRenderFailed, *FieldError,
// *FencedError) that every service of worker 0 returns and api maps to statuses; it answers no
// HTTP. Tests wait on the moments TestSignals names; production leaves them nil. Settings are
// what they all read of the configuration; Settings.Resolve resolves a key's route once (the
// policy's one match, with the route's settings compiled where the settings are assembled),
// and a service hands that KeyRoute to every decision it makes of the key.
//
// The services built over Targets and these shared pieces live in packages of their own: the
// applier (apply), render on miss (misses), the sitemap runs (sitemapruns) and the claims and
// leases worker 0 hands out (leases). The holder ids that name remote renderers in the lease
// table (holders.go) stay here, since explain and a revoke read them.
//
// Invariants, each enforced here and pinned by the tests named in docs/ARCHITECTURE.md
// ("Fenced effects"):
//   - Per-key locks from first read to commit. Every read-decide-write sequence of worker 0
//     (a result, an upsert, a rush or wait, a delete) holds the locks of its keys from its first
//     read of the store to its commit, so none overwrites another's decision (a lost update).
//   - Upserts merge. What an item omits keeps its stored value (due, cadence, source), so a
//     re-import never resets a due time; a stored due time out of range is taken as now.
//   - Operator actions win over renders in flight. A delete, rush or wait revokes the lease of
//     the key's render in flight after its commit, under the key's lock, so that render's
//     result is fenced instead of undoing it.
package intake
