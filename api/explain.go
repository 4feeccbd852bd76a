package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/rows"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Explain serves GET and DELETE /v1/targets.
type Explain struct {
	Store  store.Store
	Seg    *shm.Segment
	Policy func() *policy.Policy
	Now    func() int64
	// Deleter deletes; nil means Store. Worker 0 passes sweep.Changes' wrapper, so that a sweep
	// in progress does not publish the deleted row.
	Deleter Deleter
	Locks   *intake.KeyLocks // worker 0's, shared with every other writer; nil: none
}

// Deleter is the store's delete.
type Deleter = intake.Deleter

// Register adds the endpoints to mux.
func (x *Explain) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/targets", x.get)
	mux.HandleFunc("DELETE /v1/targets", x.delete)
}

// keyOf reads ?url=&device= into a cache key, answering 400 itself when they are bad.
func keyOf(w http.ResponseWriter, r *http.Request, pol *policy.Policy) ([]byte, bool) {
	key, err := intake.Key(r.URL.Query().Get("url"), r.URL.Query().Get("device"), intake.Devices(pol.Config()))
	if err != nil {
		fail(w, err)
		return nil, false
	}
	return key, true
}

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

func (x *Explain) get(w http.ResponseWriter, r *http.Request) {
	pol := x.Policy()
	key, ok := keyOf(w, r, pol)
	if !ok {
		return
	}
	row, err := x.Store.GetSchedule(key)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "url", "no such target")
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	tgt, err := x.Store.GetTarget(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	now := x.Now()
	pr := rows.Policy(key, row)
	cadence, origin := pol.Cadence(&pr)
	route, swr := pol.RouteOf(key)
	ex := wire.Explanation{
		Key: string(key), URL: tgt.URL, Device: tgt.Device, Source: tgt.Source.String(),
		DueAt: ms(row.DueAtMs), DueInSec: float64(row.DueAtMs-now) / 1000,
		Cadence:    wire.Cadence{Seconds: float64(cadence) / 1000, Origin: origin.String(), Route: route},
		Lane:       policy.LaneOf(&pr).String(),
		Score:      pol.Score(&pr, cadence, now),
		DemandRung: int(tgt.DemandRung),
	}
	if origin == policy.OriginRow && tgt.StoredIntervalMs == 0 && tgt.DemandRung > 0 {
		ex.Cadence.Origin = "rung"
	}
	if li, ok := x.Seg.Leases().Lookup(shm.KeyHash(key), now); ok {
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
	if page, err := x.Store.GetPage(key); err == nil {
		age := now - page.RenderedAtMs
		ex.Page = &wire.PageFreshness{AgeSec: float64(age) / 1000, AgeOverCadence: float64(age) / float64(cadence),
			SWRSec: float64(swr) / 1000, Servable: age <= cadence+swr}
	}
	writeJSON(w, http.StatusOK, ex)
}

// delete removes the target, its schedule row, its index entry and its page
// (intake.Targets.Delete, which says why a 200 is never undone by a render in flight).
func (x *Explain) delete(w http.ResponseWriter, r *http.Request) {
	key, ok := keyOf(w, r, x.Policy())
	if !ok {
		return
	}
	svc := &intake.Targets{Store: x.Store, Deleter: x.Deleter, Locks: x.Locks, Seg: x.Seg, Policy: x.Policy, Now: x.Now}
	if err := svc.Delete(key); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": string(key)})
}
