// Package chrome is the chrome renderer (render.renderer: chrome): one long-lived headless
// Chromium per render worker, driven over the DevTools protocol through its pipe (chromedp),
// each render in a tab of its own, render.concurrency of them at once.
//
// chromedp because it speaks the protocol over the browser's own pipe (--remote-debugging-pipe:
// no debugging port that anything else on the host could reach), its types are generated from
// the protocol's definitions (cdproto), it needs no Node.js, and it is the maintained Go choice.
//
// # What a render does
//
//   - Vets the URL: http or https, its host in render.domains (else outcome.Blocked at "policy").
//   - Takes a tab: one the browser kept from an earlier render, else a new one (tabs.go: opening
//     a tab costs more than rendering a trivial page). It emulates the request's device
//     (Options.Devices, resolved by package assemble from render.devices, or the built-in desktop and mobile: viewport,
//     device scale, mobile emulation with touch, user agent), set anew where it differs from
//     what the tab had.
//   - Vets every request before it is sent (the Fetch domain): a document, its redirects and its
//     frames must be in render.domains, within render.max_redirects and not a loop; nothing but
//     http and https is fetched (no file:, no chrome:); render.chrome.block_types and
//     render.chrome.block (with the third parties of render.chrome.block_third_parties, which
//     package assemble adds) are refused, but for what the page's render.chrome.allow entry (the
//     first whose match takes its path) lets load. Every refusal is counted (Hooks.Blocked).
//   - Fetches the document and every redirect of it from the origin, on every render and for
//     every device (with that device's user agent): a document request is sent on with
//     Cache-Control and Pragma no-cache and without conditional headers (tab.vet), so Chromium's
//     HTTP cache neither answers it from a copy it kept (a page with only Last-Modified is kept
//     by heuristic freshness; a permanent redirect is kept for good) nor revalidates one. A
//     re-render must see the site as it is now. Sub-resources (scripts, styles) stay cached
//     between renders: that is most of what a long-lived browser saves. Per request, in the
//     Fetch domain where every request is already vetted, because the alternatives reach too
//     far: Network.setCacheDisabled turns the cache off for every request of the tab, and
//     clearing a cache entry clears the whole browser's cache.
//   - Does not keep a site's old scripts for long after the site deploys new ones under the same
//     URLs (app.js with max-age of a day): the browser's cache is cleared
//     (Network.clearBrowserCache, through the tab of the render that finds it due, once)
//     before a render when it was last cleared longer ago than render.chrome.cache_max_age
//     (default 10m; by the renderer's clock, from the browser's start), and when the render's
//     request carries a cache epoch (render.Request.CacheEpoch, worker 0's counter that an
//     operator's recache or rush raises) above the last one it was cleared at.
//   - Takes a second look, cold, at a render that looks wrong while some of its sub-resources
//     came from the browser's cache (Network.requestServedFromCache, or a response from the disk
//     or prefetch cache): its status (the document's, or the page's declared one) is 400–599, or
//     its scripts threw, or its own data requests failed or were still pending. The page is
//     rendered once more in the same Render call and render.timeout, on a tab whose cache is
//     turned off for that render (Network.setCacheDisabled, turned back on before the tab is
//     kept), and that render's result is returned, Signals.Cold set. The tab's switch rather
//     than no-cache headers on sub-resources in the Fetch domain: a script Blink holds in its
//     renderer's memory cache is answered there and never reaches the Fetch domain (its
//     requestServedFromCache is how it is seen at all), while the switch bypasses that cache
//     too; and it bypasses the caches only for reading, so the new script the second look
//     fetched replaces the old in the HTTP cache and the next render of the site is warm with
//     it (the deploy test renders a second new route without a second look). This is what a
//     deploy under the same URLs looks like: the old script renders a new route as its
//     NotFound (a declared 404), and the cold look renders it with the new code.
//   - Remembers, per browser, what the last second look at each site (the render.domains entry
//     the page's host is under, else the host) found, when its cold render found the same as
//     the warm render it repeated (the same status of 400–599 or none, and the same of
//     exceptions, failed and pending requests): the cache did not explain it. Such a site's
//     renders that look wrong the same way take no second look until the browser's cache is
//     next cleared (cache_max_age, a new cache epoch), which forgets them all: the cached
//     scripts that could explain them are gone then, and a deploy since is fetched anew. A
//     second look is a second render; without this, a site that throws an uncaught exception
//     or keeps a same-site long-poll pending on every load, cold or warm, would be rendered
//     twice every time its scripts were cached. The price: a deploy that makes a site's new
//     routes look wrong the same way a second look found unchanged (its real NotFound) reaches
//     those routes when the cache is next cleared, not at once. A second look whose cold
//     render fixed or changed what looked wrong keeps second looks on for the site; one that
//     did not reach the page (a timeout, a crash) changes nothing; one begun before a clear is
//     not kept after it. At most 1024 sites are kept, the one written longest ago dropped first.
//   - Is ready when window.prerenderReady === true if the page defines it, whatever its network
//     does; else, after the load event, when its own data requests say so (below: at least one
//     was made, all have been answered, nothing else holds the page, and render.chrome.settle
//     has passed since the page's last request began or ended, with three looks into the page
//     answered by its main thread since, so that a busy machine cannot end the settle before the
//     page's script ran), or when the network has been idle for render.chrome.idle. A page that
//     made no data request has only the idle: content its timers add makes no request. Package
//     netidle holds these rules.
//     Idle: no request began or ended in that time, and every request still in flight has been so
//     for longer than its bound. The page's own data requests — an XHR or fetch of the main frame
//     to its site (the document's host, or a host under the same render.domains entry) — are
//     bounded by render.chrome.data_wait (default 10 s); every other request by
//     render.chrome.long_request (default 2 s). EventSource and WebSocket connections never hold a
//     page, nor a data request answered with a stream (netidle.Streams: a long-poll at once).
//     Otherwise a long-poll, a hanging beacon or a chunked answer over fetch is told from a page's
//     own data fetch only by its age: a third party's request is not the page's content, and is let
//     go at 2 s (four times the default idle); the site's own API is the content, and a slow one
//     answers in seconds (a product page whose API answers in 3 s would otherwise be captured
//     showing "Loading…"), while a long-poll is held for tens of seconds: past data_wait a
//     same-site request is taken to be one, and the page is ready about data_wait after it began
//     rather than timing out, reported with it pending (Signals). Its URL (no query) is then
//     remembered by the browser as a long-poll (netidle.LongPolls): a request to it holds no later
//     page, and is still reported pending, so the verdict judges it against the page's last good
//     render; it is forgotten when a request to it is answered, and all are when the browser's
//     cache is cleared. Puppeteer's networkidle2 (idle with at most 2 connections open) was not
//     taken: it captures a page whose two slow data fetches have not answered yet, a page stored
//     without its content, where this rule waits for them. A page that is not ready within
//     render.timeout is outcome.Timeout with no body: nothing of it is stored.
//   - Hears the tab's Network and Page events in one place, in the order the browser sent them
//     (chromedp.Listen), and remembers the requests that ended: a request's end handled before
//     its start (they arrive together on a cache hit) would otherwise look in flight forever,
//     and the page would never be idle. The load event is that of the render's own document: a
//     reused tab's about:blank may tell its load after the next render began, and does not count.
//   - Captures the serialized DOM (with its doctype), <script> elements removed but JSON-LD
//     unless render.chrome.keep_scripts, and judges it as render.JudgePage does: the prerender
//     meta tags' status, else the document's response status; noindex. The document's ETag and
//     Last-Modified go with the page only when it asked no site for data (then they describe
//     its content), so that its next render may be a conditional GET of the document instead.
//   - Reports its phases in Result.Timings, and what it saw of the page besides its document in
//     Result.Signals, the evidence package verdict judges before a completed render replaces a
//     stored page: uncaught exceptions (Runtime.exceptionThrown, of this render's document),
//     the page's own data requests that failed and those still in flight when the DOM was
//     captured, with a few lines of evidence (render.MaxEvidence of render.MaxEvidenceLen
//     bytes). Signals is nil only for a render whose document never committed.
//   - Counts as failed only a data request that says the page's data did not arrive: a network
//     error, or an answer 5xx, 408, 429, 404 or 410 (a product API answering 404 is the page
//     losing its content). Not 401, 403 or any other 4xx: a real SPA asks endpoints such as
//     /api/me or /api/cart that answer 401 or 403 to a visitor who is not logged in, which a
//     prerender never is, and every render of such a site would be suspect and looked at twice.
//     Nor one freshq refused (render.chrome.block, block_types, the address policy), nor one
//     cancelled (by the page, or as the tab left it).
//   - Parks the tab on about:blank, waiting until the blank document is committed (its page's
//     scripts and requests end there), and gives it back for the next render; a tab that
//     crashed, failed to park or whose render did not end cleanly (a timeout) is closed.
//
// # Safety
//
//   - Every request the browser makes leaves through an HTTP proxy inside the worker (egress),
//     which dials under render's address policy: loopback, private, link-local (the cloud
//     metadata address), CGNAT and the other internal addresses are refused unless
//     render.domains lists them, on the address actually dialled. Chromium resolves no names
//     itself behind a proxy, and loopback is not bypassed, so a page's scripts cannot reach the
//     render host's network; WebRTC may not go around the proxy.
//   - The proxy listens on loopback, where any local user could reach it: it serves only its own
//     browsers. Each browser has credentials of its own there (a random name and secret, ended
//     when it closes), which the proxy asks for (407) and the tab answers through the Fetch
//     domain; a connection without them is refused before anything is dialled.
//   - When the worker runs as root the browser runs as render.chrome.user (nobody) with
//     Chromium's sandbox on; render.chrome.no_sandbox is for kernels that cannot give one.
//     The browser gets a minimal environment (no FRESHQ_TOKEN) and a fresh profile directory,
//     removed when it closes; one left by a worker killed with -9 is removed by the next
//     renderer started on the machine.
//
// # Stability
//
//   - The browser is retired after render.chrome.recycle_after renders, or when the Pss of its
//     processes passes render.chrome.max_rss (looked at every 5 s at most, off the renders' path); the renders
//     on it finish, then it is killed, and the next render starts a new one.
//   - A crashed tab fails its render only (outcome.Failed at "browser", transient; a navigation
//     its crash aborted too), and is closed. A kept tab that crashed while it waited is never
//     handed out: the next render opens a new one. A browser that exits fails the renders on
//     it, and the next render starts a new browser.
//
// # No browser outlives its worker
//
// Four mechanisms, one of which does the work when a worker dies without closing (kill -9):
//
//   - The parent-death signal does it. The browser's main process is started with SIGKILL as
//     its parent-death signal, so the kernel kills it as the worker exits, however it exits;
//     its helpers (zygotes, renderers, GPU, network and storage processes) then end as their
//     channel to it closes, and the crash handlers Chromium starts in sessions of their own
//     end with the processes they serve. (Linux sends the signal when the thread that forked
//     exits; Go ends no thread it has not locked, and nothing here locks one.)
//   - The DevTools pipe is the brace. The kernel closes the worker's end of the browser's
//     command pipe as the worker exits; Chromium reads EOF there and shuts itself down
//     (traced: EOF 6 ms after the kill, every process gone 0.3 s later). With the signal it is
//     never needed; without it, it alone ends the browser.
//   - A close (a stop, a reload, a recycle, a crash) kills the browser's process group, then
//     every process still naming its profile (the crash handlers), and removes the profile.
//   - The next renderer started on the machine kills what still uses the profile of a worker
//     that is gone, and removes it: a late sweep, not a bound on how long a browser may live.
//
// The supervisor's end-to-end test kills a render worker with -9 and requires every process
// of its browsers gone before the worker is restarted (so that the sweep cannot hide a
// survivor). EnvSurvive, in test builds only, starts browsers that outlive their worker (own
// session, no parent-death signal, their command pipe held open) to show that test can fail.
package chrome
