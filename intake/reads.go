package intake

import (
	"errors"
	"fmt"
	"time"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/verdict"
	"github.com/freshq/freshq/wire"
)

// The operator's reads of one target: what the queue makes of it (Explain) and its stored page
// (Page). They take no lock: each reads a committed state of the store and the lease table, and
// the answer is a snapshot that a concurrent write may overtake.

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// Explain says what the queue makes of the target key: its due time, cadence and where that
// came from, lane, score, lease, failures, terminal state, last render and the freshness of
// its stored page. It returns a *FieldError naming "url" that matches ErrNotFound when no such
// target is stored, and a *StoreError when the store fails.
func (t *Targets) Explain(key []byte) (wire.Explanation, error) {
	set := t.Settings()
	pol := set.Policy
	row, err := t.store.GetSchedule(key)
	if errors.Is(err, store.ErrNotFound) {
		return wire.Explanation{}, fieldErr("url", ErrNotFound)
	}
	if err != nil {
		return wire.Explanation{}, &StoreError{err}
	}
	tgt, err := t.store.GetTarget(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return wire.Explanation{}, &StoreError{err}
	}
	now := t.Now()
	pr := policy.Row{Key: key, Row: row}
	kr := set.Resolve(key)
	cadence, origin := pol.CadenceOf(&pr, kr.Policy)
	route, swr := kr.Policy.Name, kr.Policy.SWRMs
	ex := wire.Explanation{
		Key: string(key), URL: tgt.URL, Device: tgt.Device, Source: tgt.Source.String(),
		DueAt: ms(row.DueAtMs), DueInSec: float64(row.DueAtMs-now) / 1000,
		Cadence:    wire.Cadence{Seconds: float64(cadence) / 1000, Origin: origin.String(), Route: route},
		Lane:       policy.LaneOf(&pr).String(),
		Score:      pol.Score(&pr, pol.RankInterval(&pr, cadence), now),
		DemandRung: int(tgt.DemandRung),
	}
	if origin == policy.OriginRow && tgt.StoredIntervalMs == 0 && tgt.DemandRung > 0 {
		ex.Cadence.Origin = "rung"
	}
	if li, ok := t.seg.Leases().Lookup(shm.KeyHash(key), now); ok {
		ex.Lease = &wire.LeaseInfo{Holder: li.Holder, HolderName: HolderName(li.Holder), AcquiredAt: ms(li.AcquiredAtMs), ExpiresAt: ms(li.ExpiresAtMs), Released: li.Released}
	}
	if f := tgt.Failures; f.Count > 0 {
		ex.Failures = &wire.Failures{Count: f.Count, Class: f.LastClass, FirstAt: ms(f.FirstMs), LastAt: ms(f.LastMs)}
	}
	if tgt.Terminal != store.TerminalNone {
		ex.Terminal = &wire.Terminal{State: tgt.Terminal.String(), RecheckAt: ms(tgt.TerminalRecheckMs)}
	}
	if lr := tgt.LastRender; lr.AtMs > 0 {
		ex.LastRender = &wire.RenderInfo{Status: int(lr.Status), At: ms(lr.AtMs), DurationMs: lr.DurationMs, Bytes: lr.Bytes}
	}
	if page, err := t.store.GetPage(key); err == nil {
		age := now - page.RenderedAtMs
		ex.Page = &wire.PageFreshness{AgeSec: float64(age) / 1000, AgeOverCadence: float64(age) / float64(cadence),
			SWRSec: float64(swr) / 1000, Servable: age <= cadence+swr}
	}
	ex.Freshness = explainFreshness(set, t.tuning.Load(), kr, cadence, &tgt.Fresh, now)
	ex.Verdict = explainVerdict(&tgt.Verdict)
	return ex, nil
}

// explainVerdict is the target's last verdict; nil when no render of it was judged.
func explainVerdict(v *store.Verdict) *wire.Verdict {
	if v.AtMs == 0 {
		return nil
	}
	reasons := verdict.Reasons(v.Reasons)
	out := &wire.Verdict{Result: "good", Reasons: reasons.Names(), AtMs: v.AtMs, Marked: v.Marked}
	if reasons != 0 {
		out.Result = "suspect"
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	if v.Agree.Count > 0 {
		out.Agree = &wire.VerdictAgree{Count: int(v.Agree.Count), FirstMs: v.Agree.FirstMs}
	}
	return out
}

// ServedPage is a stored page that may be served, with its age.
type ServedPage struct {
	store.Page
	AgeMs int64 // now − when it was rendered
	Stale bool  // past its cadence (but within its swr window)
}

// Page returns the stored page of key if it may be served: within its cadence plus the route's
// stale-while-revalidate window, and with a final HTTP status (200–599). Otherwise it returns a
// *FieldError naming "url" that matches ErrNotFound (no page, or one past its window, saying
// by how much), ErrBadStoredPage for a status HTTP cannot send (a page stored by an older
// version or a faulty renderer is refused until it is rendered again), or a *StoreError.
func (t *Targets) Page(key []byte) (ServedPage, error) {
	pol := t.Policy()
	pg, err := t.store.GetPage(key)
	if errors.Is(err, store.ErrNotFound) {
		return ServedPage{}, fieldErr("url", &kindError{kind: ErrNotFound, msg: "no rendered page"})
	}
	if err != nil {
		return ServedPage{}, &StoreError{err}
	}
	row, err := t.store.GetSchedule(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return ServedPage{}, &StoreError{err}
	}
	pr := policy.Row{Key: key, Row: row}
	kr := pol.Resolve(key)
	cadence, _ := pol.CadenceOf(&pr, kr)
	swr := kr.SWRMs
	age := t.Now() - pg.RenderedAtMs
	if age > cadence+swr {
		return ServedPage{}, fieldErr("url", &kindError{kind: ErrNotFound, msg: fmt.Sprintf(
			"page is %ds old, past its cadence (%ds) plus its swr window (%ds)", age/1000, cadence/1000, swr/1000)})
	}
	if !FinalStatus(int(pg.Status)) {
		return ServedPage{}, &kindError{kind: ErrBadStoredPage, msg: fmt.Sprintf(
			"the stored page has status %d, which is not a final HTTP status (200-599); it is not served until the page is rendered again", pg.Status)}
	}
	return ServedPage{Page: pg, AgeMs: age, Stale: age > cadence}, nil
}
