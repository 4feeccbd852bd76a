// Package serve is the crawler listener (serve.listen): the prerender protocol that every
// prerender middleware speaks (prerender-node, the nginx and Apache recipes, Cloudflare
// workers), GET or HEAD of /{absolute URL}, /render/{url} and /render?url=, answered from the
// stored pages. Worker 0 serves it itself, on a socket the supervisor listens on and hands it,
// so that a page is one store read away and no proxy hop (docs/ARCHITECTURE.md, Serving
// crawlers).
//
// Invariants:
//   - Pages only. Nothing else of the API is reachable here, and the only state a request
//     changes is bounded: a render on miss (one flight per key, misses.Flights, for hosts
//     render.domains names, new targets at most serve.miss_rate a second per site) and the
//     rush of an expired page's row (queued, one per key at a time, at most serve.miss_rate a
//     second per site). A site is what render.domains names (misses.Settings.SiteOf): every
//     port and subdomain of an entry counts against that entry, and a key's host is canonical
//     (package cachekey), so no spelling of a URL multiplies a site's limits. A hit never waits on a write: the rush is done off the request.
//   - Every refusal (method, token, URL, device, host, rate) is a JSON error naming the field
//     and writes nothing.
//   - A request whose User-Agent claims a crawler that documents a verification, and whose
//     client address (serve.client_ip_header from serve.trusted_proxies only, package crawlers)
//     does not verify, costs no render: a page stored is served as to anyone, a page not stored
//     is a 503 naming User-Agent (with Retry-After, as unnamedHost) and nothing is filed.
//     Only the answer that depends on the verdict, a page not stored (a render, or the 503),
//     waits for verification, at most serve.verify.timeout; every other answer, a stored page
//     above all, is given at once with the verdict known then (cached, or pending while the
//     lookup it started runs in the background: crawlers.Verifier.Known). Every request is
//     counted by the family it claims and its verification, label values from fixed sets.
//   - Without serve.tokens, where the loopback peer is all that authorizes a request, no web
//     page can drive the listener: a request whose Host is not localhost or a loopback address,
//     or that carries a browser's Origin or Sec-Fetch-Site (but none), is refused before its
//     URL is read (fromABrowser). A token holder is the middleware, and is not checked.
//   - A URL whose key the store cannot hold (over store.MaxKeyLen) is a 400 naming url, never
//     a 503 a crawler would retry.
//   - The URL goes through the same keying as every other entry point (intake.Key), so a page
//     a crawler asks for is the page a sitemap filed.
//   - A stale page is served, marked (X-Freshq-Cache: stale, X-Freshq-Stale: true), never
//     refused, unless its route says serve_stale: false.
//
// How a page is served, and why so:
//   - The socket. The supervisor binds it once, or inherits it (systemd's socket unit, or a
//     handover from the supervisor it replaces: supervise/listeners), and hands it to
//     worker 0 (-serve-fd), so it outlives the supervisor and a restart of worker 0, whose
//     connections wait in the accept queue meanwhile.
//   - A hit is two reads of the store's read view (page and schedule row) in the request's
//     goroutine: no proxy hop through the supervisor, and no queue behind the write funnel (a
//     Badger read transaction would wait for a commit being written, so the store's reads
//     share one the funnel renews after each commit, docs/store.md). The pages crawlers ask for
//     most come from the store's read cache, which the funnel empties of a key before it writes
//     it. Files every process could read were the other choice: they would double the pages'
//     storage and need their own atomic write and GC, for a rate the measurement
//     (docs/BENCHMARKS.md, serve) shows worker 0 reaching over half of from files anyway.
//   - Pages of 1 KiB or more are stored gzipped, compressed once when the render is applied,
//     and written as stored to a client that accepts gzip; one that does not gets them streamed
//     through a gzip reader, never decompressed whole, with the plain length recorded at write
//     time (page v2) as their Content-Length.
//   - Demand. Requests per stored key are counted after the page's lookup (with verification
//     on, only a request whose claim is verified: Handler.countsDemand), decayed (two
//     generations of one hour), in worker 0's memory (Demand, bounded by serve.demand_bytes),
//     not in the row, so a hit never waits on a write; every freshness.demand_flush worker 0
//     writes the counts into the targets' request counters (intake.Demand) in one funnel batch
//     under the keys' locks, and once more when the listener stops.
//   - On a cluster each node serves the pages its store reads; a miss rendered by another node
//     wakes its waiters here within a period of the commit (misses.Flights.Watch).
package serve
