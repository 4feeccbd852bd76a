// Package leases is the claims and leases worker 0 hands out: a render worker's index-claim
// fallback (ClaimIndex, with the job's wire form, WireJob and ClaimJob), and the claims,
// extensions and releases of remote renderers (Remote). They write no row, but they decide who
// may render what.
//
// Invariants:
//   - Under the same key locks as every write (intake.KeyLocks): a remote's extend or release
//     is never interleaved with a result of the same key being applied.
//   - Bounded: one remote holds at most queue.max_remote_leases live leases, and all remotes
//     together at most half the lease table, so that the local render workers are never
//     starved by a remote that stops returning its leases or claims under ever new names.
//   - A lease extended or released is the grant it names, or the request fails with
//     intake.ErrLeaseNotHeld and changes nothing.
//
// The holder ids that name remote renderers in the lease table (intake.RemoteHolder,
// intake.HolderName) and the release of a remote's host slot (intake.ReleaseRemoteHostSlot)
// stay in package intake, which reads them when it explains or revokes a lease.
package leases
