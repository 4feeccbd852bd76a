// Package render turns a URL into a page: the renderers behind one interface, and the
// classification of what happened into an outcome.Outcome that policy/ then judges (transient,
// deterministic or terminal: see policy.Classify). render/ decides what happened, never
// what it means for the row.
//
// Four renderers, chosen by render.renderer:
//
//   - http (the default): a GET with the User-Agent for the request's device, one deadline for the
//     whole exchange (dial to the last body byte), a body limit, bounded redirects with loop
//     detection, and noindex detected in X-Robots-Tag and in the robots meta tags of the head.
//   - exec: runs render.exec.command with the URL appended as its last argument and takes the page
//     from stdout — for a headless browser, e.g.
//     ["chromium", "--headless", "--disable-gpu", "--dump-dom"].
//   - chrome (package render/chrome, which builds on this one): one long-lived headless
//     Chromium per render worker, driven over the DevTools protocol on a pipe, rendering
//     render.concurrency pages at once in tabs it keeps between renders. A page is captured
//     when it is ready (window.prerenderReady === true if it defines it, else
//     render.chrome.idle of network quiet after the load event), its scripts removed; every
//     request is vetted before it is sent (render.domains for documents and redirects, only
//     http and https, render.chrome.block_types and render.chrome.block refused) and leaves
//     through an egress proxy inside the worker that dials under this package's address policy
//     (NewTransport). As root the browser runs as render.chrome.user with Chromium's sandbox;
//     it is recycled after render.chrome.recycle_after renders or past render.chrome.max_rss, a
//     crash fails only the renders on it, and it never outlives its worker (its package doc
//     says which mechanism ends it).
//   - sim: draws a latency and an outcome from render.sim, for benchmarks and the demo.
//
// Every renderer that reads a page (http, exec, chrome) honours the prerender meta tags: a
// status and Location the page declares replace the response's (prerender.go; JudgePage for a
// page a browser produced).
//
// # Guarantees
//
//   - Render never panics and always returns a classified Result. A deadline or a cancelled
//     context is outcome.Timeout, whatever stage it interrupted.
//   - No shell, ever. The exec renderer starts the command directly (execve), the URL a single
//     argv entry, so `;`, `$(…)`, quotes and spaces in a URL reach the program verbatim. On a
//     timeout the whole process group is killed, so a browser's helper processes die with it.
//   - The allowlist holds on every hop. render.domains is checked on the URL asked for and on every
//     redirect target before it is dialled: a redirect cannot lead the renderer off the list
//     (Allowed documents the matching). Only http and https are fetched.
//   - Internal addresses only when listed. The http renderer (and sitemap fetches and the chrome
//     renderer's egress proxy, through NewTransport) dial a loopback, private, link-local, CGNAT, multicast or otherwise internal
//     address only when render.domains lists that address or, exactly, the name being dialled.
//     The check runs on the resolved address at dial time, so DNS rebinding cannot pass it, and
//     its error names the policy, never the address or whether a port answered.
//   - Bounded memory. A body (or exec's stdout) is read to at most max_body+1 bytes into a buffer
//     that never grows past that — also after gzip decoding — and a larger one is outcome.TooLarge;
//     exec's stderr keeps its last 4 KiB; response headers are capped.
//   - Bounded time. A render returns within render.timeout (or as soon as ctx ends) plus the
//     moment a kill takes — for exec, at most 1 s more if a descendant escaped its process group
//     and holds stdout open.
//
// # Stages
//
// Result.Stage says where a render ended. The names are stable (they reach logs and the row's
// last-attempt record):
//
//	policy   refused before any connection: the host is not in render.domains, or it resolved to
//	         an internal address that render.domains does not list (first URL or a redirect)
//	dial     DNS, TCP connect, TLS handshake
//	request  writing the request
//	headers  waiting for and reading the response status and headers; every status-only outcome
//	         (404, 410, 5xx, too many redirects) ends here
//	body     reading the body, and the judgements made on it (too large, meta noindex, OK)
//	exec     the exec renderer's process: could not start, exited non-zero, was killed
//	browser  the chrome renderer's browser: it could not start, or it or the page's tab crashed
//	navigate the chrome renderer's navigation: requests, redirects, the document's response
//	ready    the chrome renderer waiting for the page to be ready
//
// A bad URL ends at "request" as outcome.Failed.
package render
