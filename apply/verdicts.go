package apply

import (
	"strconv"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/verdict"
	"github.com/freshq/freshq/wire"
)

// Render verdicts (docs/RENDERING.md, "Render verdicts"): every result that would store a page
// (outcome ok, a 2xx status, a body the store can hold) is judged before it is applied, and a
// suspect one does not replace a good page.
//
//   - Judged outside the locks. The body's landmarks and the route's Expect are read before the
//     batch takes its keys' locks (judgments, beside digests); under the lock, decide compares
//     them with the target's last good render (verdict.Judge), the content digest with its
//     digest (a render of the good content is never suspect).
//   - A suspect over a good page is not applied: the stored page is left exactly as it is
//     (served, stale past its cadence, as with any failure), the row is retried as a transient
//     failure of class "suspect" (policy's backoff, a streak of its own), the body is kept for
//     inspection (Suspects), and the suspects' agreement is counted. Once verdict.Settings'
//     Agree renders with one content span AgreeSpan, the site really changed: that render is
//     applied as the page and its landmarks become the good ones. An operator's accept
//     (Applier.Accept) is the same, at once.
//   - A page with no good render (never rendered, its stored page a marked one, or its page
//     dropped by an operator's wait, which marks the target) stores a suspect anyway, nothing
//     better existing, and marks it; the next render replaces it as any render would.
//   - A good render clears the agreement and the mark, and its landmarks and digest become the
//     last good ones.
//
// V1: no verdict makes a servable page unservable. A suspect changes the stored page only where
// it would have been stored without verdicts (no good page), and never deletes one.

// SuspectClass is the failure class (store.Failures.LastClass) of a suspect render that was not
// applied: its retries back off as a streak of their own.
const SuspectClass = "suspect"

// VerdictCounter counts the verdicts' effects (freshq_render_suspect_total,
// freshq_render_suspect_accepted_total): each suspect render once per reason, and each suspect
// applied as the page by agreement or by an operator.
type VerdictCounter interface {
	Suspect(verdict.Reasons)
	Accepted()
}

// judgment is what a result's verdict needs that is read outside the keys' locks: its
// landmarks and whether it has its route's Expect. nil for a result that is not judged.
type judgment struct {
	landmarks verdict.Landmarks
	expect    *verdict.Expect // the route's; nil: none
	found     bool
	signals   *wire.Signals
	// accept: an operator's accept of a kept suspect, applied as a good render.
	accept bool
}

// render is what verdict.Judge looks at of the result, but whether it is unchanged.
func (j *judgment) render() verdict.Render {
	in := verdict.Render{Landmarks: j.landmarks, ExpectFound: j.found}
	if s := j.signals; s != nil {
		in.Exceptions, in.FailedRequests, in.PendingRequests = s.Exceptions, s.FailedRequests, s.PendingRequests
	}
	return in
}

// judged reports whether r is judged: an ok render with a 2xx status and a body the store can
// hold. Redirects and the other statuses a page may declare are the page's word, not a render
// that lost it.
func judged(r *wire.Result) bool {
	return r.Outcome == okName && r.Status >= 200 && r.Status <= 299 && len(r.Body) > 0 && len(r.Body) <= store.MaxPageBody
}

// judgments reads, outside the locks, the landmarks and Expect (of its route, routes[i]) of
// every result that is judged.
func judgments(results []wire.Result, routes []intake.KeyRoute) []*judgment {
	out := make([]*judgment, len(results))
	for i := range results {
		r := &results[i]
		if !judged(r) {
			continue
		}
		j := &judgment{signals: r.Signals, expect: routes[i].Expect()}
		j.landmarks, j.found = verdict.InspectExpect(r.Body, j.expect) // one pass for both
		out[i] = j
	}
	return out
}

// verdictOutcome is what a result's verdict did, for what follows its commit (counters, the
// log, the kept bodies).
type verdictOutcome struct {
	judged   bool
	reasons  verdict.Reasons // 0: good
	applied  bool            // stored as the page
	accepted bool            // a suspect applied as the page by agreement or an operator
	agree    int
	digest   uint64
	changed  bool // the content changed since the page's previous render (observeContent)
}

// judge gives the verdict of a judged result under the key's lock, from the target's state, and
// changes that state (t.Verdict) as it decides. It says whether the result is applied as the
// page (store) or as a transient failure of class SuspectClass.
func judge(set *intake.Settings, j *judgment, t *store.Target, row store.Row, digest uint64, now int64) (store bool, out verdictOutcome) {
	vs := &t.Verdict
	out = verdictOutcome{judged: true, digest: digest}
	var last *verdict.Landmarks
	if vs.HasGood {
		l := landmarksOf(vs.Good)
		last = &l
	}
	unchanged := vs.HasGood && digest == vs.GoodDigest
	if !vs.HasGood && !vs.Marked && !row.NeverRendered && t.Fresh.Digest != 0 {
		// A page stored before verdicts were kept: its render is the good one there is, and
		// its digest the last full render's (the stored page's).
		unchanged = digest == t.Fresh.Digest
	}
	in := j.render()
	in.Unchanged = unchanged
	vset := verdictSettings(set)
	v := verdict.Judge(vset, &in, last, j.expect)
	vs.AtMs = now
	if j.accept {
		v = verdict.Verdict{}
		out.accepted = true
	}
	if !v.Suspect() {
		setGood(vs, in.Baseline(), digest)
		out.applied = true
		return true, out
	}
	out.reasons = v.Reasons
	vs.Reasons = uint32(v.Reasons)
	ag := agreementOf(vs.Agree).Observe(digest, now)
	out.agree = ag.Count
	if ag.Agreed(vset) {
		// The site really changed: this content is the page now, and the one to compare with.
		setGood(vs, in.Baseline(), digest)
		vs.Reasons = uint32(v.Reasons)
		out.applied, out.accepted = true, true
		return true, out
	}
	vs.Agree = storeAgreement(ag)
	// A good page is stored: a render of it (row.NeverRendered is cleared by a good render)
	// that is not marked. Without one, the suspect is the best page there is.
	if row.NeverRendered || vs.Marked {
		vs.Marked = true
		out.applied = true
		return true, out
	}
	return false, out
}

// setGood makes the render of landmarks (its verdict.Render.Baseline: the content's landmarks
// and the render's signals) and digest the last good one: the agreement and the mark cleared.
func setGood(vs *store.Verdict, lm verdict.Landmarks, digest uint64) {
	at := vs.AtMs
	*vs = store.Verdict{HasGood: true, Good: storeLandmarks(lm), GoodDigest: digest, AtMs: at}
}

func landmarksOf(l store.Landmarks) verdict.Landmarks {
	return verdict.Landmarks{TextLen: l.TextLen, Title: l.Title, H1: l.H1, Description: l.Description, Canonical: l.Canonical,
		Exceptions: l.Exceptions, FailedRequests: l.FailedRequests, PendingRequests: l.PendingRequests}
}

func storeLandmarks(l verdict.Landmarks) store.Landmarks {
	return store.Landmarks{TextLen: l.TextLen, Title: l.Title, H1: l.H1, Description: l.Description, Canonical: l.Canonical,
		Exceptions: l.Exceptions, FailedRequests: l.FailedRequests, PendingRequests: l.PendingRequests}
}

func agreementOf(a store.Agreement) verdict.Agreement {
	return verdict.Agreement{Digest: a.Digest, Count: int(a.Count), FirstMs: a.FirstMs, LastMs: a.LastMs}
}

// storeAgreement is a as the store keeps it; a clock that stepped back between two suspects
// leaves the run's span 0, never one that ends before it starts (which the store refuses).
func storeAgreement(a verdict.Agreement) store.Agreement {
	first := max(a.FirstMs, 0)
	return store.Agreement{Digest: a.Digest, Count: uint32(min(max(a.Count, 0), 1<<31)), FirstMs: first, LastMs: max(a.LastMs, first)}
}

// afterVerdict does, after the commit, what a judged result's verdict asks: a suspect is
// counted, reason by reason, and logged; one not applied keeps its body (Suspects), newest
// wins; one applied makes a kept body of its key obsolete.
func (a *Applier) afterVerdict(set *intake.Settings, r *wire.Result, j *judgment, vo *verdictOutcome, now int64) {
	if vo.reasons != 0 {
		if a.d.Verdicts != nil {
			a.d.Verdicts.Suspect(vo.reasons)
		}
		_, url, _ := cachekey.Split(r.Key)
		a.d.Log.Info().Bytes("key", r.Key).Str("url", url).Strs("reasons", vo.reasons.Names()).
			Int("agree_count", vo.agree).Str("digest", strconv.FormatUint(vo.digest, 16)).
			Bool("applied", vo.applied).Msg("render suspect")
	}
	if vo.accepted && a.d.Verdicts != nil {
		a.d.Verdicts.Accepted()
	}
	if vo.applied {
		a.d.Suspects.Drop(r.Key)
		return
	}
	a.coldRetry(now)
	// Kept with its signals, so that an operator's accept makes them the good render's too.
	in := j.render()
	a.d.Suspects.Put(newSuspect(set, r.Key, vo.reasons, now, vo.agree, vo.digest, r.Status, r.Headers, r.Body, in.Baseline()), keepBytes(set))
}

// coldRetryEvery bounds how often suspects raise the cache epoch.
const coldRetryEvery = time.Minute

// coldRetry raises the cache epoch for a suspect render not applied, so that its retry, and the
// node's next renders, fetch the site's scripts and styles anew: a browser that kept a site's
// old script after a deploy renders the new route wrong again and again while its cache is
// warm, and the row is retried to be believed only once it was rendered cold. At most once a
// coldRetryEvery: a site answering errors on every page must not keep the node's browsers cold,
// and what one clear fixes, the next renders see.
func (a *Applier) coldRetry(now int64) {
	last := a.coldAtMs.Load()
	if last != 0 && now-last < coldRetryEvery.Milliseconds() {
		return
	}
	if a.coldAtMs.CompareAndSwap(last, now) {
		a.d.Seg.BumpCacheEpoch()
	}
}

// Accept applies key's kept suspect render as its page now: the operator's word that it is the
// site's real change, in place of the agreement of further renders. It is decided as a good
// render of that body at now (its landmarks and digest become the good ones, the agreement and
// the mark cleared, the row due a cadence from now), under the key's lock like any result; the
// target's last render stays the one that rendered. The kept body is dropped once applied.
//
// It returns the suspect applied; a *intake.FieldError naming "url" that matches intake.ErrNotFound when no
// suspect of key is kept (none was, worker 0 restarted since, or a later render replaced it) or
// the target is gone; intake.ErrShardNotOwned when another node holds its shard; a *intake.StoreError when
// the store fails (nothing written).
func (a *Applier) Accept(key []byte) (*Suspect, error) {
	e, ok := a.d.Suspects.Get(key)
	if !ok {
		return nil, intake.NewFieldError("url", intake.NewKindError(intake.ErrNotFound, "no suspect render of this page is kept"))
	}
	set, tu := a.d.Settings(), a.d.Tuning.Load()
	r := wire.Result{Key: key, Outcome: okName, Status: e.Status, Headers: e.Headers, Body: e.Body}
	kr := set.Resolve(key)
	digest := a.digests(set, []wire.Result{r}, []intake.KeyRoute{kr})[0]
	// The kept landmarks carry the suspect's signals (afterVerdict): they become the good
	// render's, so that the next render is judged against what this one had.
	j := &judgment{landmarks: e.Landmarks, accept: true, signals: &wire.Signals{Exceptions: int(e.Landmarks.Exceptions),
		FailedRequests: int(e.Landmarks.FailedRequests), PendingRequests: int(e.Landmarks.PendingRequests)}}
	defer a.d.Locks.Lock([][]byte{key})()
	now := a.d.Now()
	var (
		vo       verdictOutcome
		sv       servedStale
		notOwner bool
	)
	filed, err := a.d.Writer.Modify([]store.Change{{Key: key, MinDueMs: now, Decide: func(cur store.Current) (store.Write, bool, error) {
		if cur.NotOwner {
			notOwner = true
			return store.Write{}, false, nil
		}
		vo = verdictOutcome{}
		w, ok, err := decide(set, tu, &r, kr, cur, digest, j, nil, now, &sv, &vo)
		if ok && w.Target != nil {
			w.Target.LastRender = cur.Target.LastRender // an accept is no render
		}
		return w, ok, err
	}}})
	switch {
	case err != nil:
		return nil, &intake.StoreError{Err: err}
	case notOwner:
		return nil, intake.NewKindErrorCause(intake.ErrStore, "not applied: "+intake.ErrShardNotOwned.Error(), intake.ErrShardNotOwned)
	case len(filed) == 0 || !filed[0]:
		return nil, intake.NewFieldError("url", intake.ErrNotFound)
	}
	a.d.Suspects.Drop(key)
	if a.d.Verdicts != nil {
		a.d.Verdicts.Accepted()
	}
	a.d.Log.Info().Bytes("key", key).Str("url", e.URL).Strs("reasons", e.Reasons.Names()).Int("agree_count", e.Agree).
		Str("digest", strconv.FormatUint(digest, 16)).Msg("render suspect accepted by an operator")
	a.d.Misses.Applied(key, okName)
	return e, nil
}

// KeptSuspects returns the kept suspect renders of site (every site's for ""), newest first.
func (a *Applier) KeptSuspects(site string) []*Suspect { return a.d.Suspects.Site(site) }

// KeptSuspect returns key's kept suspect render.
func (a *Applier) KeptSuspect(key []byte) (*Suspect, bool) { return a.d.Suspects.Get(key) }

// intake.Settings returns the settings in force (what the API keys a request's URL with).
func (a *Applier) Settings() *intake.Settings { return a.d.Settings() }
