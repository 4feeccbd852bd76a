// Package apply is worker 0's applier: it turns render results into writes (Applier:
// Validate, fencing, Apply, and Deliver, which is both as an endpoint receives a batch), judges
// each page before it may replace a good one (the verdict, verdicts.go), keeps the suspect
// bodies it refused (Suspects), digests pages for the freshness estimator (content.go),
// applies a conditional check's 304 (conditional.go) and counts the stale pages served
// (StaleMeter). It wakes render on miss's flights (MissWaker, package misses) and hands a
// remote renderer's leases to leases.Remote (NewRemote). Its settings are intake.Settings,
// read once per batch, and each result's route is resolved once (intake.Settings.Resolve) and
// read by its digest, its verdict, its decision and its freshness; it returns the sentinel errors of package intake, which api maps to
// statuses, and answers no HTTP. River's jobcompleter is the model.
//
// Invariants, each enforced here and pinned by the tests named in docs/ARCHITECTURE.md
// ("Fenced effects"):
//   - Per-key locks from first read to commit: a result holds its key's lock (intake.KeyLocks,
//     shared with every other writer of worker 0) from its first read of the store to its
//     commit, so no other write lands between its decision and its commit.
//   - Fencing, at most once per grant. A result is applied only while the lease it was rendered
//     under is still that grant, checked under the key's lock and held through the commit; a
//     duplicate, a lapsed or released lease, and a render an operator overtook change nothing.
//   - Nothing half-written. A result is one funnel write (row, target, page in one
//     transaction); a batch that fails to commit wrote nothing, or says which writes did
//     (store.PartialWriteError), and only those leases are released.
//   - A result's due time is policy.Apply's, counted from now, never a stored one brought
//     forward out of range.
//   - A host's refusal is not the page's failure. With a hosts.Tracker, a 429 or a 503 with
//     Retry-After writes nothing (its row stays due, unstruck) and pauses its host before its
//     lease is released; every result whose lease held feeds its host's state once per Apply
//     that commits (a batch whose commit fails is observed by its retry). A fenced result
//     changes nothing, host state included: a duplicate, a forged or lapsed lease, or a result
//     naming any host it likes cannot pause, throttle or evict a host.
//   - A suspect render never replaces a good page (verdicts.go). Every result that would store
//     a page is judged first; a suspect one over a good page is applied as a transient failure,
//     the page left exactly as it was, until renders agree or an operator accepts it. No
//     verdict makes a servable page unservable (V1).
package apply
