// Package sitemapruns is worker 0's sitemap runs: it reads a sitemap (posted, or named by
// sitemap.urls and read again every sitemap.refetch) in the background and upserts what it
// lists through the targets service (intake.Targets.UpsertChunk).
//
// Reading a sitemap (fetching, decompressing under a bound, following an index, parsing) is
// package sitemap's, and its doc says how each threat of untrusted XML is met; a run takes what
// it reads and upserts it.
//
// Invariants:
//   - Nothing is half-written: package sitemap hands over no entry of a file that does not
//     parse to its end, so a malformed or truncated file lands nothing (the run fails with the
//     parser's reason). An index's children are files of their own: a bad child is one failure
//     of the run, its siblings still land. URLs go to the store in chunks of
//     intake.ChunkItems, so memory stays flat whatever the file's size.
//   - A run reads its Settings once, at its start: its keys, its domains and its fetcher's
//     options come from one configuration, whatever a reload does meanwhile.
//   - After Stop no run writes again: every write passes a gate that Stop shuts once the chunk
//     in flight has committed.
//
// A 50,000-URL import takes longer than an HTTP request should, so Submit starts a run and
// returns its id; the run proceeds on its own and Run reports its progress and result. The
// last MaxRuns runs are kept in memory (worker 0 restarting forgets them; submitting a
// sitemap again is harmless because upserts never reset a due time). <loc> is the target and
// <changefreq> its cadence (sitemap.ChangefreqCadence).
package sitemapruns
