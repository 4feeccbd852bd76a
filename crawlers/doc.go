// Package crawlers tells a crawler from a request that only claims to be one. It holds the
// one table of User-Agent patterns the crawler listener reads: the crawler families (their
// patterns, the verification each documents: reverse-DNS suffixes confirmed forward, or
// published address ranges, and optionally the device they render as) and the device patterns
// (families.yaml's devices: Mobile, Android, iPhone make a request mobile). It finds a
// request's client address behind the proxies the operator trusts, and verifies a claimed
// crawler's address, with a bounded cache of the answers. It counts what each family got,
// per family (Tally) and per page (PageTally, bounded), for the operator API and the console.
//
// The table is data: package config holds the operator's (serve.crawlers replaces the
// families, serve.mobile_agents the device patterns) and validates it to the same rules, with
// the family names and bounds a test pins equal to this package's, and assemble/settings joins
// the two (New). So this package stays a leaf that imports nothing of freshq, and config
// needs none of it: a family's device is checked against the configuration's devices there,
// the one place both are known.
//
// Invariants:
//   - A request's device is its family's, when the table gives the family one, else the first
//     device pattern its User-Agent carries, else none (the caller's default, desktop): one
//     family's crawlers are of both kinds (Googlebot's smartphone and desktop crawlers share
//     the name), so the device patterns are entries of their own, not of each family.
//   - A family is one of Families, whatever the User-Agent or the configuration: the labels
//     counted by family and verification (Families × Verdicts) are a bounded set.
//   - A client address is read from a header only when the peer is a trusted proxy, and then
//     it is the right-most address of the header that is not itself a trusted proxy: what a
//     client writes into the header itself is to the left of what its proxy appended, and is
//     never taken while a proxy's entry stands to its right.
//   - Verification never waits past Options.Timeout (a lookup or a wait for a lookup slot):
//     what times out or fails is Unverified, never an error and never a longer wait. At most
//     Options.Concurrency lookups run at once, and at most one per family and address: a
//     request that finds one running waits for it (Verify) or leaves it running (Known).
//   - Known never waits: it answers what is known now (Pending when nothing is) and starts
//     the lookup in the background, within the same slots and timeout, for the next request.
//   - The cache of verdicts holds at most Options.CacheEntries entries, each for at most
//     Options.CacheTTL, whatever the number of addresses that claim a crawler.
//   - A name is confirmed only forward: a reverse name matching a family's suffix counts only
//     when that name resolves back to the address (a PTR record is the address owner's to
//     write, and anyone may write googlebot.com into their own).
//   - The per-page tally (PageTally) holds at most MaxPages pages and MaxBytes bytes of them,
//     whatever the URLs requested: a page asked for once is the first evicted, and a page's
//     counts are exact from the moment it entered the table (its Since).
//   - Nothing here invents an address range: a family whose documentation publishes ranges
//     not shipped with freshq is Unverifiable until the operator's table gives them.
package crawlers
