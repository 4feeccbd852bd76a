// Package pagedigest is the content digest of a rendered page: what tells two renders of a
// page apart when its content changed, and alike when only what changes on every load did.
// A Normalizer strips that (CSRF tokens, nonces, timestamps, cache-busting query strings and
// hash segments of asset URLs, and a route's own patterns) and hashes what is left into 64
// bits.
//
// Invariants:
//   - A Digest is a pure function of the body and the Normalizer's rules: the same bytes give
//     the same digest in any process, so digests stored by one version compare with the next
//     only while the default rules stay the same (DefaultsVersion names them; a change of
//     rules reads as one change of every page, which the estimator absorbs as one
//     observation).
//   - A Digest is never 0: 0 is the store's "no digest yet".
//   - Nothing here panics on any input, and the cost is linear in the body for each rule
//     (Go's regexp runs in linear time).
//
// Imports nothing of freshq.
package pagedigest
