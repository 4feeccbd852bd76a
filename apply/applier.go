package apply

import (
	"errors"
	"fmt"
	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/leases"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Applier writes results in worker 0: each result becomes one funnel write (its reschedule,
// its target and its page in one transaction), a batch becomes one WriteSchedules call, and
// only after a write commits is its lease released, with the commit-visibility grace.
//
// A result is fenced by its lease: Apply checks it (shm.Leases.Check) under the key's lock,
// where it decides, holds it through the commit, and releases it after the commit, before the
// lock is let go. Everything that ends a lease from outside the render takes the same lock
// first: a delete, rush or wait (which revoke it) and a remote renderer's extend or release.
// A lease whose expiry falls within applyCommitBound is extended to it before the decision (a
// lease that cannot be extended is fenced), so no lease lapses while its result commits and
// no other grant of the key can exist meanwhile. So a result is applied at most once per grant,
// and only while the grant is held: a duplicate delivery (a batch retried after worker 0
// committed it), a result whose lease lapsed or was released, and one whose render an operator
// overtook all find the grant gone, and are fenced: they change nothing at all, page included.
// Keeping a fenced result's page "if the row is otherwise unchanged" would need a second
// notion of what changed; a fenced page is at most one render stale, and the row renders again
// on its schedule.
type Applier struct {
	d         ApplierDeps
	digesters digesterCache
	// coldAtMs is when a suspect last raised the cache epoch (coldRetry).
	coldAtMs atomic.Int64
}

// ApplierDeps are what an Applier needs. Every one is required but Log, Test, Conditional,
// Stale and Verdicts, which only observe, and Suspects, an inspection aid (without it nothing is
// kept to look at or accept; the verdicts are the same); each required one carries a guarantee
// that would silently go if it were left out:
//   - Writer: every write passes the sweep's wrapper (sweep.Changes), so that a sweep never
//     publishes a row written after its snapshot;
//   - Locks: the key locks shared with every other read-decide-write of worker 0, so that no
//     write lands between a result's decision and its commit;
//   - Seg: the lease table a result is fenced by;
//   - Misses: the flights a committed result wakes (render on miss); NoMisses where the node
//     renders nothing on miss;
//   - Hosts: told every result whose lease held, so that a refusal pauses its host and leaves
//     its row as it was; NoPoliteness where refusals are to be applied as failures (a node
//     that renders nothing of a real host, a test).
type ApplierDeps struct {
	Store    store.Store // reads
	Writer   intake.Writer
	Locks    *intake.KeyLocks
	Seg      *shm.Segment
	Settings func() *intake.Settings // read once per batch: its policy decides, its settings bound
	Now      func() int64
	Log      zerolog.Logger
	Misses   MissWaker
	Hosts    HostObserver

	// Tuning is worker 0's capacity-following threshold and ceilings for queue.policy
	// freshness (capacity.Service.Freshness). It only refines: nil, or empty until the first
	// tuning, files with the configuration's freshness.threshold and the routes' intervals.
	Tuning *freshness.TuningCell

	// Test holds the test signals (intake.TestSignals.AfterDecide); nil in production.
	Test *intake.TestSignals
	// Conditional is told of every 304 result committed (conditional.go): applied as
	// "unchanged, verified now" (true), or refused and applied as a failure (false). nil: not told.
	Conditional func(applied bool)
	// Stale is told, for every result committed that observed its page's content again, the
	// crawler requests served since the previous observation and how many of them were
	// served stale (staleServed). nil: not measured.
	Stale *StaleMeter
	// Suspects keeps the bodies of suspect renders not applied, for inspection and accept
	// (Accept); nil: none kept, and nothing to accept.
	Suspects *Suspects
	// Verdicts counts suspect renders and accepted suspects; nil: not counted.
	Verdicts VerdictCounter
	// Renders is told of every result applied, after its commit (the recent renders and
	// failures the console shows); nil: none kept.
	Renders RenderLog
}

// RenderLog keeps what the Applier applied: each result filed, with whether its content
// changed since the page's previous render and its verdict ("good", the suspect's reasons
// joined by commas, or "" for a result that was not judged). Called after the commit, under
// the key's lock; it must not block.
type RenderLog interface {
	Applied(r *wire.Result, changed bool, verdict string)
}

// MissWaker is woken (Applied) for each result committed, after the commit and under the
// key's lock: *misses.Flights, or NoMisses.
type MissWaker interface {
	Applied(key []byte, outcome string)
}

// HostObserver is told each result whose lease held, after its batch commits, and says
// whether it was its host refusing the render (a 429, or a 503 with Retry-After): the
// *hosts.Tracker of worker 0, or NoPoliteness. A fenced result is not told (anyone can post
// one, naming any host; only a held lease shows the answer came from a render this node
// granted). With a Tracker, a refusal is not applied: the host is paused, and the row, its
// target and its page stay exactly as they were (no strike, no backoff, its due time kept), so
// the row is granted again once the host allows.
type HostObserver interface {
	Observe(key []byte, o outcome.Outcome, status int, headers map[string]string, now int64) (refused bool)
}

type noMisses struct{}

func (noMisses) Applied([]byte, string) {}

// NoMisses is the MissWaker of a node without render on miss: it wakes nobody.
var NoMisses MissWaker = noMisses{}

type noPoliteness struct{}

func (noPoliteness) Observe([]byte, outcome.Outcome, int, map[string]string, int64) bool {
	return false
}

// NoPoliteness is the HostObserver that keeps no politeness: a refusal is applied as a failure
// like any other (its row backs off), since nothing would pause its host.
var NoPoliteness HostObserver = noPoliteness{}

// NewApplier returns the Applier over d, or intake.ErrMissingDependency naming the first required
// field left nil.
func NewApplier(d ApplierDeps) (*Applier, error) {
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Store", d.Store == nil}, {"Writer", d.Writer == nil}, {"Locks", d.Locks == nil}, {"Seg", d.Seg == nil},
		{"Settings", d.Settings == nil}, {"Now", d.Now == nil}, {"Misses", d.Misses == nil}, {"Hosts", d.Hosts == nil},
	} {
		if dep.nil {
			return nil, fmt.Errorf("%w: Applier needs %s", intake.ErrMissingDependency, dep.name)
		}
	}
	return &Applier{d: d}, nil
}

// NewRemote returns the remote renderers' service that shares a's key locks, lease table,
// settings and clock, claiming with c.
func (a *Applier) NewRemote(c *claim.Claimer) *leases.Remote {
	return &leases.Remote{Claimer: c, Locks: a.d.Locks, Seg: a.d.Seg, Settings: a.d.Settings, Now: a.d.Now}
}

// applyCommitBound is how long Apply holds a result's lease, at least, from its decision:
// longer than any commit takes (a funnel batch commits in milliseconds, a second or two with
// fsync under load). It is no configuration key because nothing should tune it: it only
// keeps a lease about to lapse (a render that finished near its TTL) from lapsing while its
// result commits. Should a commit ever outlast it, the cost is a render granted again before
// the result landed, never a result applied twice for one grant.
const applyCommitBound = time.Minute

// Apply applies a batch. Results should have passed Validate; Apply itself is safe for any
// value (a lease it cannot use is fenced). It fails only if the store cannot read or commit;
// the caller retries the batch. Then nothing was written and no lease released, except where
// the funnel committed part of the batch (a *store.PartialWriteError): the leases of the
// results that did commit are released, so the retry finds them fenced and applies only the
// rest.
func (a *Applier) Apply(results []wire.Result) (wire.ApplyStats, error) {
	set, tu := a.d.Settings(), a.d.Tuning.Load()
	// Each result's route, resolved once: its digest, its verdict and its decision read it.
	routes := make([]intake.KeyRoute, len(results))
	for i := range results {
		routes[i] = set.Resolve(results[i].Key)
	}
	digests := a.digests(set, results, routes)
	judg := judgments(results, routes) // the verdicts' reads of the bodies, outside the locks too
	keys := make([][]byte, len(results))
	for i := range results {
		keys[i] = results[i].Key
	}
	defer a.d.Locks.Lock(keys)()
	now := a.d.Now()
	leases := a.d.Seg.Leases()
	var st wire.ApplyStats
	var refused []heldResult // refusals: their leases released, nothing written
	changes := make([]store.Change, 0, len(results))
	held := make([]shm.Lease, 0, len(results)) // the lease of each change
	index := make([]int, 0, len(results))      // the result of each change
	// notOwner[j]: the funnel found change j's shard held by another node (store.Current).
	notOwner := make([]bool, len(results))
	heldKey := make(map[uint64]bool, len(results))
	holders := make([]uint64, 0, len(results))       // the holder of each change's lease
	var conditional []condResult                     // the 304 results among the changes
	served := make([]servedStale, len(results))      // what each change observed of its requests
	verdicts := make([]verdictOutcome, len(results)) // what each change's verdict did
	for i := range results {
		r := &results[i]
		h := shm.KeyHash(r.Key)
		lease := intake.ShmLease(r.Lease)
		err := leases.Check(lease, h, now)
		if err == nil && heldKey[h] {
			err = errors.New("the batch carries this key's result twice; the first one is applied")
		}
		if err == nil {
			err = holdThroughCommit(leases, &lease, now)
		}
		if err != nil {
			fence(&st, i, err)
			continue
		}
		heldKey[h] = true
		info, _ := leases.Lookup(h, now)
		if a.d.Hosts != NoPoliteness && refusal(r) {
			refused = append(refused, heldResult{lease: lease, result: i, holder: info.Holder})
			continue
		}
		holders = append(holders, info.Holder)
		j := len(changes)
		var verified *store.Page // the stored page a 304 may refresh; nil: not one, or refused
		if notModified(r) {
			verified = a.verifiable(set, r.Key, now)
			conditional = append(conditional, condResult{change: j, applied: verified != nil})
		}
		changes = append(changes, store.Change{Key: r.Key, MinDueMs: now,
			Decide: func(cur store.Current) (store.Write, bool, error) {
				if cur.NotOwner {
					notOwner[j] = true
					return store.Write{}, false, nil
				}
				verdicts[j] = verdictOutcome{}
				return decide(set, tu, r, routes[i], cur, digests[i], judg[i], verified, now, &served[j], &verdicts[j])
			}})
		held = append(held, lease)
		index = append(index, i)
	}
	if a.d.Test != nil && a.d.Test.AfterDecide != nil {
		a.d.Test.AfterDecide()
	}
	w := a.d.Writer
	grace := set.ReleaseGrace.Milliseconds()
	// A remote renderer's host slot is worker 0's to give back, with the lease (claims.go).
	releaseHost := func(result int, holder uint64, done int64) {
		intake.ReleaseRemoteHostSlot(a.d.Seg, &set.Hosts, results[result].Key, holder, done)
	}
	var filed []bool
	if len(changes) > 0 {
		var err error
		if filed, err = w.Modify(changes); err != nil {
			return wire.ApplyStats{}, a.failed(err, held, grace, func(j int, done int64) { releaseHost(index[j], holders[j], done) })
		}
	}
	done := a.d.Now()
	a.afterCommit(set, results, judg, index, filed, served, conditional, verdicts, now)
	a.observe(results, observedOf(refused, index, notOwner), done)
	for _, rf := range refused {
		leases.Release(rf.lease, done, grace)
		releaseHost(rf.result, rf.holder, done)
		st.HostRefused++
	}
	for j, l := range held {
		leases.Release(l, done, grace)
		releaseHost(index[j], holders[j], done)
		switch {
		case filed[j]:
			st.Applied++
			if a.d.Renders != nil {
				vo := &verdicts[j]
				verdict := ""
				if vo.judged {
					verdict = vo.reasons.String()
				}
				a.d.Renders.Applied(&results[index[j]], vo.changed, verdict)
			}
			// After the commit and before the key's lock is let go: a waiter woken now reads
			// the page this result stored.
			a.d.Misses.Applied(results[index[j]].Key, results[index[j]].Outcome)
		case notOwner[j]:
			fence(&st, index[j], intake.ErrShardNotOwned)
		default:
			st.Skipped++
		}
	}
	return st, nil
}

// afterCommit tells the meters what the committed changes observed: the crawler requests
// their rows had counted and how many were served stale, the 304s applied as such, and each
// judged render's verdict (afterVerdict). A change the funnel did not file tells nothing.
func (a *Applier) afterCommit(set *intake.Settings, results []wire.Result, judg []*judgment, index []int, filed []bool,
	served []servedStale, conditional []condResult, verdicts []verdictOutcome, now int64) {
	if a.d.Stale != nil {
		for j, s := range served {
			if j < len(filed) && filed[j] && s.served > 0 {
				a.d.Stale.Add(s.served, s.stale)
			}
		}
	}
	if a.d.Conditional != nil {
		for _, c := range conditional {
			if filed[c.change] {
				a.d.Conditional(c.applied)
			}
		}
	}
	for j, i := range index {
		if filed[j] && verdicts[j].judged {
			a.afterVerdict(set, &results[i], judg[i], &verdicts[j], now)
		}
	}
}

// observedOf are the results whose answers the host's state learns from: the refusals, and
// every change but those of a shard another node holds (their result is fenced, and a fenced
// result changes nothing, host state included).
func observedOf(refused []heldResult, index []int, notOwner []bool) []int {
	observed := make([]int, 0, len(refused)+len(index))
	for _, rf := range refused {
		observed = append(observed, rf.result)
	}
	for j, i := range index {
		if !notOwner[j] {
			observed = append(observed, i)
		}
	}
	return observed
}

// condResult is a 304 result of a batch: its change, and whether it is applied as one.
type condResult struct {
	change  int
	applied bool
}

// verifiable returns the stored page a 304 for key refreshes, or nil when the key may not be
// verified by a conditional check now (conditionalAllowed) and the 304 is applied as a
// failure. It reads under the key's lock, which every writer of the key takes, so the funnel
// reads the same target in the commit.
func (a *Applier) verifiable(set *intake.Settings, key []byte, now int64) *store.Page {
	t, err := a.d.Store.GetTarget(key)
	if err != nil || !intake.ConditionalAllowed(set, &t, now) {
		return nil
	}
	pg, err := a.d.Store.GetPage(key)
	if err != nil {
		return nil
	}
	return &pg
}

// heldResult is a result whose lease checked: the lease, the result's index in its batch, and
// the lease's holder.
type heldResult struct {
	lease  shm.Lease
	result int
	holder uint64
}

// failed releases the leases of the changes a failed Modify committed anyway (a
// *store.PartialWriteError), so that the retry of the batch finds them fenced, and wraps err;
// releaseHost gives back change j's host slot with it. Nothing is observed and no refusal's
// lease is released: the retry does both, once.
func (a *Applier) failed(err error, held []shm.Lease, grace int64, releaseHost func(j int, done int64)) error {
	if pe := (*store.PartialWriteError)(nil); errors.As(err, &pe) {
		done, leases := a.d.Now(), a.d.Seg.Leases()
		for i, ok := range pe.Committed {
			if ok && i < len(held) {
				leases.Release(held[i], done, grace)
				releaseHost(i, done)
			}
		}
	}
	return fmt.Errorf("intake: apply %d results: %w", len(held), err)
}

// observe tells a.Hosts the results of the batch whose lease held (their indexes), before any
// lease is released: a refused row's host is paused before the row can be granted again.
func (a *Applier) observe(results []wire.Result, held []int, now int64) {
	for _, i := range held {
		r := &results[i]
		o, _ := outcome.Parse(r.Outcome)
		a.d.Hosts.Observe(r.Key, o, r.Status, r.Headers, now)
	}
}

// refusal reports whether r is its host refusing the render (hosts.Refusal).
func refusal(r *wire.Result) bool {
	o, _ := outcome.Parse(r.Outcome)
	return hosts.Refusal(o, r.Status, r.Headers)
}

// holdThroughCommit extends a checked lease that would lapse within applyCommitBound to it,
// under the key's lock, before the result is decided. A lease that cannot be extended (its
// state changed since the check) is not held: the result is fenced.
func holdThroughCommit(leases *shm.Leases, l *shm.Lease, now int64) error {
	bound := applyCommitBound.Milliseconds()
	if leases.ExpiresAtMs(*l) >= now+bound {
		return nil
	}
	if !leases.Extend(l, now, bound) {
		return fmt.Errorf("%w: it changed before it could be held through the commit", shm.ErrLeaseNotHeld)
	}
	return nil
}

func fence(st *wire.ApplyStats, i int, err error) {
	st.Fenced++
	if len(st.FencedItems) < intake.MaxReportErrors {
		st.FencedItems = append(st.FencedItems, wire.ItemError{Index: i, Field: fmt.Sprintf("results[%d].lease", i), Error: err.Error()})
	}
}

// decide turns one result into its funnel write, from the row and target the funnel read for
// it in the transaction that files it. The due time is policy.Apply's, counted from now (so
// never before the Change's MinDueMs), never the stored one (which a row from an older
// version may hold out of range). ok is false when the row no longer exists: a result must
// not resurrect a row deleted while it rendered.
//
// A judged result (j not nil) gets its verdict first (judge, verdicts.go), which says in vo
// what it did: a suspect that is not applied is decided as a transient failure of class
// SuspectClass, its page not stored.
func decide(set *intake.Settings, tu *freshness.Tuning, r *wire.Result, kr intake.KeyRoute, cur store.Current, digest uint64, j *judgment, verified *store.Page, now int64, sv *servedStale, vo *verdictOutcome) (store.Write, bool, error) {
	if !cur.HasRow {
		return store.Write{}, false, nil
	}
	row, t := cur.Row, cur.Target
	if !cur.HasTarget {
		t = targetFromKey(r.Key, row.Submitted)
	}
	o, body := storable(r)
	if notModified(r) {
		if verified == nil || !cur.HasTarget {
			// A 304 this page may not answer now: not a render, and not the page's failure
			// either, but a failed attempt all the same, so that it is retried (in full:
			// Validators refuses the check) after a fast retry.
			o, body = outcome.Failed, nil
		} else {
			return decideNotModified(set, tu, r, kr, row, t, verified, now, sv)
		}
	}
	failClass, suspect := t.Failures.LastClass, false
	if j != nil && o == outcome.OK {
		var stored bool
		if stored, *vo = judge(set, j, &t, row, digest, now); !stored {
			// A transient failure whose streak is the suspects' own: policy continues a
			// streak of its class (transient), so only a suspect one is continued.
			o, suspect, failClass = outcome.Failed, true, ""
			if t.Failures.LastClass == SuspectClass {
				failClass = policy.ClassTransient.String()
			}
		}
	}
	d := set.Policy.ApplyRoute(policy.State{
		Key:              r.Key,
		Submitted:        row.Submitted,
		CarriedMs:        row.EffectiveIntervalMs,
		StoredIntervalMs: row.StoredIntervalMs,
		DemandRung:       t.DemandRung,
		FailCount:        t.Failures.Count,
		FailClass:        failClass,
		FailFirstMs:      t.Failures.FirstMs,
		NeverRendered:    row.NeverRendered,
	}, kr.Policy, o, now)
	if suspect {
		d.FailClass = SuspectClass
	}
	if d.StorePage && o == outcome.OK && digest != 0 {
		if ob, ok := observeContent(&t.Fresh, digest, r.Headers, now); ok {
			vo.changed = ob.changed
			*sv = servedStaleOf(set, tu, kr, d.CadenceMs, &t.Fresh, ob, now)
		}
	}
	var fp intake.FreshParts // zero (no rank interval) unless freshness files the due time or ranks a retry
	switch {
	case !set.Freshness.On:
	case d.Class == policy.ClassSuccess:
		// Due once a render would prevent freshness.threshold stale serves (schedule.go).
		fp = intake.FreshPartsOf(set, tu, kr, d.CadenceMs, &t.Fresh, now)
		d.DueAtMs = now + fp.IntervalMs
	default:
		// A retry after its backoff, ranked so that it does not wait for a grant twice.
		fp.RankIntervalMs = freshness.RetryRank(d.Class == policy.ClassTransient, d.NeverRendered)
	}

	sch, err := intake.FreshSchedule(fp, r.Key, d.DueAtMs, row.Submitted, d.CadenceMs,
		store.Lanes{NeverRendered: d.NeverRendered, Failing: d.Failing})
	if err != nil {
		return store.Write{}, false, fmt.Errorf("intake: result for %q: %w", r.Key, err)
	}
	t.DemandRung = d.DemandRung
	t.Failures = store.Failures{Count: d.FailCount, LastClass: d.FailClass, FirstMs: d.FailFirstMs, LastMs: d.FailLastMs}
	t.Terminal, t.TerminalRecheckMs = terminalOf(d.Terminal), d.RecheckAtMs
	t.LastRender = store.RenderSummary{Status: uint16(max(0, r.Status)), AtMs: now, DurationMs: max(0, r.DurationMs), Bytes: uint64(len(r.Body))}
	w := store.Write{Schedule: sch, Target: &t}
	if d.StorePage || notFoundPage(o, r, body, row) {
		plain := len(body)
		body, headers := intake.CompressPage(body, pageHeaders(r.Headers))
		w.Page = &store.Page{Status: uint16(r.Status), Headers: headers, Body: body, RenderedAtMs: now}
		if intake.Gzipped(w.Page) { // recorded, so a client without gzip gets its length undecoded
			w.Page.PlainLen = int64(plain)
		}
	}
	return w, true, nil
}

// decideNotModified applies a 304 to a conditional check: the page is unchanged, verified now.
// It is scheduled as a success (its cadence, or its freshness crossing), its target gets one
// unchanged observation and the check counted (applyNotModified), and the stored page is
// written again with now as its time, so that it is served as fresh as a render would be; the
// last render (LastRender) is not a 304's, so the bound on checks is counted from it.
func decideNotModified(set *intake.Settings, tu *freshness.Tuning, r *wire.Result, kr intake.KeyRoute, row store.Row, t store.Target, pg *store.Page, now int64, sv *servedStale) (store.Write, bool, error) {
	d := set.Policy.ApplyRoute(policy.State{Key: r.Key, Submitted: row.Submitted, CarriedMs: row.EffectiveIntervalMs,
		StoredIntervalMs: row.StoredIntervalMs, DemandRung: t.DemandRung, NeverRendered: row.NeverRendered}, kr.Policy, outcome.OK, now)
	if ob, ok := applyNotModified(&t, r.Headers, now); ok {
		*sv = servedStale{served: ob.served}
	}
	var fp intake.FreshParts
	if set.Freshness.On {
		fp = intake.FreshPartsOf(set, tu, kr, d.CadenceMs, &t.Fresh, now)
		d.DueAtMs = now + fp.IntervalMs
	}
	sch, err := intake.FreshSchedule(fp, r.Key, d.DueAtMs, row.Submitted, d.CadenceMs, store.Lanes{})
	if err != nil {
		return store.Write{}, false, fmt.Errorf("intake: result for %q: %w", r.Key, err)
	}
	t.DemandRung = d.DemandRung
	t.Failures = store.Failures{}
	t.Terminal, t.TerminalRecheckMs = store.TerminalNone, 0
	page := *pg
	page.RenderedAtMs = now
	return store.Write{Schedule: sch, Target: &t, Page: &page}, true, nil
}

// digests computes the content digest of every result that may store a page (an ok outcome
// with a body the store can hold), under its route (routes[i]), before the batch takes its
// keys' locks; 0 for the others.
func (a *Applier) digests(set *intake.Settings, results []wire.Result, routes []intake.KeyRoute) []uint64 {
	out := make([]uint64, len(results))
	var d *digesters
	for i := range results {
		r := &results[i]
		if r.Outcome != okName || len(r.Body) > store.MaxPageBody {
			continue
		}
		if d == nil {
			d = a.digesters.of(set)
		}
		out[i] = d.digest(routes[i], r.Body)
	}
	return out
}

var okName = outcome.OK.String()

// storable is the outcome and body a result is applied with. A page the store cannot hold
// (over store.MaxPageBody) is applied as too_large, without it, so that one oversized page
// fails its own row and not the batch's commit. A page without a status HTTP can send is
// applied as failed: Validate refuses one, and a stored page is served with its status.
// The outcome's name was checked by Validate; a name that is no outcome's would be applied as
// a value that is not one, which policy classifies as transient.
// notFoundPage reports whether a render that ended 404 or 410 (declared by the page, or the
// origin's status) stores the page it carried: only for a row with no good render, when the
// site's own "not found" page is the best answer there is. A page that rendered well before
// keeps being served until the evidence seals it (policy: gone takes its strikes); one render
// that says otherwise never replaces it.
func notFoundPage(o outcome.Outcome, r *wire.Result, body []byte, row store.Row) bool {
	return render.KeepsPage(o) && row.NeverRendered && len(body) > 0 && r.Status >= 400 && r.Status <= 499
}

func storable(r *wire.Result) (o outcome.Outcome, body []byte) {
	o, _ = outcome.Parse(r.Outcome)
	switch {
	case len(r.Body) > store.MaxPageBody:
		return outcome.TooLarge, nil
	case o == outcome.OK && !intake.FinalStatus(r.Status):
		return outcome.Failed, nil
	}
	return o, r.Body
}

func terminalOf(s string) store.Terminal {
	switch s {
	case policy.TerminalGone:
		return store.TerminalGone
	case policy.TerminalSuppressed:
		return store.TerminalSuppressed
	}
	return store.TerminalNone
}

func pageHeaders(h map[string]string) []store.Header {
	out := make([]store.Header, 0, len(h))
	// location: a page that declares a redirect (render's prerender meta tags) is served with it.
	for _, name := range []string{"content-type", "content-language", "last-modified", "etag", "cache-control", "location"} {
		// A value the store would refuse is left out: it must not fail the batch's commit.
		if v, ok := h[name]; ok && len(out) < store.MaxPageHeaders && len(v) <= store.MaxHeaderLen {
			out = append(out, store.Header{Name: name, Value: v})
		}
	}
	return out
}

// targetFromKey rebuilds a minimal target for a row that has none (a row filed without one).
func targetFromKey(key []byte, submitted bool) store.Target {
	device, url, _ := cachekey.Split(key)
	src := store.SourceDiscovered
	if submitted {
		src = store.SourceSitemap
	}
	return store.Target{URL: url, Device: device, Source: src}
}

// outcomeList is the outcomes' names, for the error that refuses an unknown one.
var outcomeList = func() string {
	var names []string
	for _, o := range outcome.All() {
		names = append(names, o.String())
	}
	return strings.Join(names, ", ")
}()

// Validate checks every result of a batch before anything is applied, and returns the first
// bad one's field and why: a key of 1..store.MaxKeyLen bytes; an outcome among render's
// outcome names; a status of 200..599 (a final response: the page may be stored and served
// with it; 1xx never ends a render), or 0 for an outcome that may have had no response; a
// non-negative duration; a Location header only with a 3xx status and only an absolute
// http(s) URL (what the local renderers store: render.CheckLocation); signals within their
// bounds (checkSignals); and a lease that can be this table's grant for this key
// (shm.Leases.Valid: slot in range, key hash the key's). Whether the lease is still held is not checked here: that is
// fencing, decided under the key's lock by Apply. A body over store.MaxPageBody is not refused
// here: Apply applies it as too_large, and the rest of the batch with it.
func (a *Applier) Validate(results []wire.Result) (field string, err error) {
	leases := a.d.Seg.Leases()
	for i := range results {
		r := &results[i]
		f := func(name string) string { return fmt.Sprintf("results[%d].%s", i, name) }
		switch {
		case len(r.Key) == 0:
			return f("key"), errors.New("empty")
		case len(r.Key) > store.MaxKeyLen:
			return f("key"), fmt.Errorf("%d bytes, at most %d", len(r.Key), store.MaxKeyLen)
		case checkResultKey(r.Key) != nil:
			return f("key"), checkResultKey(r.Key)
		case !known(r.Outcome):
			return f("outcome"), fmt.Errorf("%.64q is not an outcome (one of %s)", r.Outcome, outcomeList)
		case response(r.Outcome) && !intake.FinalStatus(r.Status):
			return f("status"), fmt.Errorf("%d: outcome %s is a final HTTP response, its status must be 200..599", r.Status, r.Outcome)
		case r.Status != 0 && !intake.FinalStatus(r.Status):
			return f("status"), fmt.Errorf("%d: must be 200..599, or 0 when there was no response", r.Status)
		case r.DurationMs < 0:
			return f("duration_ms"), fmt.Errorf("%d: must not be negative", r.DurationMs)
		case r.Status == 304 && (r.Outcome != okName || len(r.Body) > 0):
			return f("status"), errors.New("304: only an ok result without a body, the answer to a conditional check (not_modified)")
		}
		if loc, ok := r.Headers["location"]; ok {
			if r.Status < 300 || r.Status > 399 {
				return f("headers.location"), fmt.Errorf("a Location only with a redirect's status (3xx), not %d", r.Status)
			}
			if err := render.CheckLocation(loc); err != nil {
				return f("headers.location"), err
			}
		}
		if err := checkSignals(r.Signals); err != nil {
			return f("signals"), err
		}
		if err := leases.Valid(intake.ShmLease(r.Lease), shm.KeyHash(r.Key)); err != nil {
			return f("lease"), err
		}
	}
	return "", nil
}

// checkSignals refuses a browser's signals no renderer sends: a negative count, or evidence
// past render.MaxEvidence lines of render.MaxEvidenceLen bytes (a render worker trims its own).
func checkSignals(s *wire.Signals) error {
	switch {
	case s == nil:
		return nil
	case s.Exceptions < 0 || s.FailedRequests < 0 || s.PendingRequests < 0:
		return errors.New("a negative count")
	case len(s.Evidence) > render.MaxEvidence:
		return fmt.Errorf("%d evidence lines, at most %d", len(s.Evidence), render.MaxEvidence)
	}
	for _, line := range s.Evidence {
		if len(line) > render.MaxEvidenceLen {
			return fmt.Errorf("an evidence line of %d bytes, at most %d", len(line), render.MaxEvidenceLen)
		}
	}
	return nil
}

// checkResultKey refuses a result key that is not a cache key: a device, the separator, and an
// absolute http(s) URL with a host, the host its host tracker would count it under. A key
// whose lease checks is always one (it was leased from the store); this refuses the others
// before anything reads them.
func checkResultKey(key []byte) error {
	device, raw, ok := cachekey.Split(key)
	if !ok {
		return fmt.Errorf("%.64q is not a cache key (device%surl)", key, cachekey.Separator)
	}
	if err := cachekey.ValidDevice(device); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Host != string(cachekey.Host(key)) {
		return fmt.Errorf("%.64q is not an absolute http(s) URL", raw)
	}
	return nil
}

func known(name string) bool { _, ok := outcome.Parse(name); return ok }

// response reports whether the named outcome is an HTTP response: its status is the
// response's, so it must be one HTTP can send. The others may end before any response, and
// carry 0 then.
func response(name string) bool { o, _ := outcome.Parse(name); return o.Response() }

// Deliver is one delivery of a batch, as an endpoint receives it: Validate, then Apply. It
// returns a *intake.FieldError naming the first bad result (nothing of the batch is applied), an
// error matching intake.ErrStore when the store failed (nothing applied: retry), a *intake.FencedError when
// every result was fenced, and otherwise the counts of what was applied, skipped and fenced.
func (a *Applier) Deliver(results []wire.Result) (wire.ApplyStats, error) {
	if field, err := a.Validate(results); err != nil {
		return wire.ApplyStats{}, intake.NewFieldError(field, err)
	}
	st, err := a.Apply(results)
	if err != nil {
		a.d.Log.Error().Err(err).Int("results", len(results)).Msg("applying results failed")
		return wire.ApplyStats{}, intake.NewKindErrorCause(intake.ErrStore, "results not applied; retry", err)
	}
	if st.Fenced > 0 {
		a.d.Log.Info().Int("fenced", st.Fenced).Int("applied", st.Applied).Int("skipped", st.Skipped).
			Msg("results fenced: their lease is not held")
	}
	if st.Fenced > 0 && st.Fenced == len(results) {
		first := st.FencedItems[0]
		return st, &intake.FencedError{Field: first.Field, Msg: first.Error, Stats: st}
	}
	return st, nil
}

// WithTestDefaults fills what a test of the Applier leaves out with the explicit values a
// test means by leaving it out: intake.Writer is Store, Locks are new ones, Misses is NoMisses and
// Hosts NoPoliteness. Production builds its deps in full (NewApplier refuses a nil).
func WithTestDefaults(d ApplierDeps) ApplierDeps {
	if d.Writer == nil && d.Store != nil {
		d.Writer = d.Store
	}
	if d.Locks == nil {
		d.Locks = &intake.KeyLocks{}
	}
	if d.Misses == nil {
		d.Misses = NoMisses
	}
	if d.Hosts == nil {
		d.Hosts = NoPoliteness
	}
	return d
}
