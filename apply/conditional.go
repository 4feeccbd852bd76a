package apply

import (
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Conditional checks. Before rendering a page whose origin sent validators, a render worker
// asks worker 0 (Validators) whether it may check it with a conditional GET; a 304 comes back
// as an ok result with status 304 and no body, which the Applier applies as "unchanged,
// verified now": one unchanged observation of the estimator, the stored page's age reset, no
// render. Worker 0 decides both times from what it stores (the origin's validators, the
// checks since the last full render, when that was), so a result claiming a 304 the page may
// not have is not applied as one: a renderer cannot stretch a page past its bounds.

// notModified reports whether r reports a 304 to a conditional check.
func notModified(r *wire.Result) bool {
	return r.Status == 304 && r.Outcome == okName
}

// applyNotModified files a 304 on the target t at now: one unchanged observation since the
// last, the check counted, the new validators if the origin sent some. The caller refreshes
// the stored page's time.
func applyNotModified(t *store.Target, headers map[string]string, now int64) (o observed, ok bool) {
	f := &t.Fresh
	if now > f.DigestAtMs {
		o, ok = observed{intervalMs: now - f.DigestAtMs, served: f.Served}, true
		h := intake.HistoryOf(f)
		h.Observe(freshness.Observation{Changed: false, IntervalMs: o.intervalMs})
		intake.SetHistory(f, h)
		f.DigestAtMs, f.Served = now, 0
	}
	f.Conditional++
	if v := validator(headers["etag"]); v != "" {
		f.ETag = v
	}
	if v := validator(headers["last-modified"]); v != "" {
		f.LastModified = v
	}
	return o, ok
}
