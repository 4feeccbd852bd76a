package apply

import (
	"math"
	"sync/atomic"

	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/pagedigest"
	"github.com/freshq/freshq/store"
)

// Observing change. Each applied render that stores a page digests the page's body after
// normalisation (package pagedigest: the defaults of freshness.normalize, then the route's
// strip patterns) and compares the digest with the one the target kept from the previous
// observation: changed or unchanged, over the interval between the two, is one observation
// of the page's change estimator (freshness.History, kept in store.Freshness).
//
// It is done here, in worker 0's Applier, not in the render worker: every result passes here
// (local render workers and remote renderers alike), so the digest is computed from the body
// that is stored, by this process, with the configuration this process runs, and a result
// carries nothing more to be trusted or checked; the previous digest is read in the very
// transaction that files the new one, under the key's lock. The cost is worker 0's CPU,
// measured in pagedigest's BenchmarkDigest, and it is paid before the batch takes its keys'
// locks.

// digesters are the normalisers of one policy: one per route that has strip patterns, in
// the order of the settings' routes (nil for a route without), and the route-less one.
type digesters struct {
	set     *intake.Settings
	byRoute []*pagedigest.Normalizer
	plain   *pagedigest.Normalizer
}

// digesterCache holds the digesters of the last settings seen (a reload builds new ones).
type digesterCache struct{ cur atomic.Pointer[digesters] }

func (c *digesterCache) of(set *intake.Settings) *digesters {
	if d := c.cur.Load(); d != nil && d.set == set {
		return d
	}
	normalize := set.Freshness.Normalize
	d := &digesters{set: set, byRoute: make([]*pagedigest.Normalizer, len(set.Routes))}
	d.plain, _ = pagedigest.New(normalize, nil)
	for i, rt := range set.Routes {
		if len(rt.Strip) == 0 {
			continue
		}
		// The configuration's validation compiled every pattern; one that fails here falls
		// back to the route-less normaliser rather than failing a result.
		if n, err := pagedigest.New(normalize, rt.Strip); err == nil {
			d.byRoute[i] = n
		}
	}
	c.cur.Store(d)
	return d
}

// digest is the content digest of a body stored under a key whose route is kr.
func (d *digesters) digest(kr intake.KeyRoute, body []byte) uint64 {
	if i := kr.Policy.Index; i >= 0 && i < len(d.byRoute) && d.byRoute[i] != nil {
		return d.byRoute[i].Digest(body)
	}
	return d.plain.Digest(body)
}

// observeContent records a full render's content at now: one observation (changed or not,
// since the last) when there was a previous one, then the new digest and the origin's
// validators. It returns the observation it made (ok false for a first one).
func observeContent(f *store.Freshness, digest uint64, headers map[string]string, now int64) (o observed, ok bool) {
	if f.Digest != 0 && f.DigestAtMs > 0 && now > f.DigestAtMs {
		o = observed{changed: digest != f.Digest, intervalMs: now - f.DigestAtMs, served: f.Served}
		ok = true
		h := intake.HistoryOf(f)
		h.Observe(freshness.Observation{Changed: o.changed, IntervalMs: o.intervalMs})
		intake.SetHistory(f, h)
	}
	f.Digest, f.DigestAtMs, f.Conditional, f.Served = digest, now, 0, 0
	f.ETag, f.LastModified = validator(headers["etag"]), validator(headers["last-modified"])
	return o, ok
}

// observed is one observation of a page's content: whether it changed over the interval since
// the previous one, and the crawler requests served meanwhile.
type observed struct {
	changed    bool
	intervalMs int64
	served     float64
}

// staleServed is the expected number of the requests served over an observation that were
// served stale, for a page changing at lambda (per hour): none when the content did not
// change; when it did, the share of the interval it was changed for, given at least one change
// under Poisson changes, 1 − (1−e^{−x})/x over 1−e^{−x} with x = λτ (one half as x → 0, 1 as
// x grows), times the requests. Measured from the serving path (the requests) and the change
// observations (changed or not); only when a change happened within is the estimator's λ used,
// to place it.
func staleServed(o observed, lambda float64) float64 {
	if !o.changed || !(o.served > 0) {
		return 0
	}
	x := lambda * float64(o.intervalMs) / 3_600_000
	q := 0.5
	if x > 1e-6 {
		q = freshness.StaleShare(lambda, 3_600_000/float64(o.intervalMs)) / -math.Expm1(-x)
	}
	return o.served * min(max(q, 0), 1)
}

// validator is an origin's validator header as a target may keep it: printable ASCII of at
// most maxValidatorLen bytes, else none (a result's headers are another process's word, and
// a value the store refuses must not fail the batch's commit).
func validator(v string) string {
	if len(v) > maxValidatorLen {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return ""
		}
	}
	return v
}

// maxValidatorLen is the longest ETag or Last-Modified kept: the store's limit on short
// strings, far above any real one.
const maxValidatorLen = 1024
