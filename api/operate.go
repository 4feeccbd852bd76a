package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/internal/rows"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Operate serves the operator actions: POST /v1/discover, POST /v1/prioritize and
// GET /v1/pages. It writes through Targets (its Writer and Locks).
type Operate struct {
	Targets *Targets
	Seg     *shm.Segment // whose leases a rush or wait revokes; nil: none (tests of other things)
}

// Register adds the endpoints to mux.
func (o *Operate) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/discover", o.discover)
	mux.HandleFunc("POST /v1/prioritize", o.prioritize)
	mux.HandleFunc("GET /v1/pages", o.page)
}

// discover turns a crawler hit on an unknown page into a discovered target, due now. A known
// target is left as it is (its source is never downgraded to discovered).
func (o *Operate) discover(w http.ResponseWriter, r *http.Request) {
	var req wire.DiscoverRequest
	if !decodeJSON(w, r, &req, 1<<20) {
		return
	}
	t := o.Targets
	p, field, err := parseItem(&wire.TargetItem{URL: req.URL, Device: req.Device, Source: "discovered"}, devices(t.Policy().Config()))
	if err != nil {
		writeError(w, http.StatusBadRequest, field, err.Error())
		return
	}
	if _, err := t.Store.GetSchedule(p.key); err == nil {
		writeJSON(w, http.StatusOK, map[string]any{"key": string(p.key), "created": false})
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	var rejected string
	n, err := t.upsert([]parsedItem{p}, func(_ int, _, msg string) { rejected = msg })
	if err != nil || n != 1 {
		writeError(w, http.StatusServiceUnavailable, "", fmt.Sprintf("not created: %v %s", err, rejected))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"key": string(p.key), "created": true})
}

// prioritize replaces every sentinel-due-time trick. rush: the rows render at the urgent lane
// (capped by queue.lanes.urgent_max_share), due now if they were due later; the due time stays
// the freshness deadline and the urgent mark clears with the next render. wait: the cached page
// is dropped and the cadence refills it, the schedule unchanged.
func (o *Operate) prioritize(w http.ResponseWriter, r *http.Request) {
	var req wire.PrioritizeRequest
	if !decodeJSON(w, r, &req, 1<<20) {
		return
	}
	if req.Mode != "rush" && req.Mode != "wait" {
		writeError(w, http.StatusBadRequest, "mode", "must be rush or wait")
		return
	}
	if (req.URL == "") == (req.Prefix == "") {
		writeError(w, http.StatusBadRequest, "url", "give exactly one of url and prefix")
		return
	}
	t := o.Targets
	device := req.Device
	if device == "" {
		device = "desktop"
	}
	if !devices(t.Policy().Config())[device] {
		writeError(w, http.StatusBadRequest, "device", "unknown device "+device)
		return
	}
	var keys [][]byte
	if req.URL != "" {
		u, err := cachekey.NormalizeURL(req.URL)
		if err != nil {
			writeError(w, http.StatusBadRequest, "url", err.Error())
			return
		}
		keys = [][]byte{cachekey.New(device, u)}
	} else {
		u, err := cachekey.NormalizeURL(req.Prefix)
		if err != nil {
			writeError(w, http.StatusBadRequest, "prefix", err.Error())
			return
		}
		if err := t.Store.ForEachSchedule(cachekey.New(device, u), func(k []byte, _ store.Row) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		}); err != nil {
			writeError(w, http.StatusServiceUnavailable, "", err.Error())
			return
		}
	}
	matched := 0
	for start := 0; start < len(keys); start += targetsChunk {
		n, err := o.apply(keys[start:min(start+targetsChunk, len(keys))], req.Mode)
		matched += n
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "", fmt.Sprintf("%v (%d targets done before it)", err, matched))
			return
		}
	}
	if matched == 0 {
		field := "url"
		if req.Prefix != "" {
			field = "prefix"
		}
		writeError(w, http.StatusNotFound, field, "no such target")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"mode": req.Mode, "matched": matched})
}

// apply rushes or waits a chunk of keys under their locks. After the commit, still under the
// locks, it revokes the lease of every key whose render is in flight: that render was granted
// before the rush or wait and would undo it (clear the urgent mark, file the next due time from
// now, store the page a wait dropped), so its result is fenced. The key is held for
// queue.release_grace, as after any render, and is then granted again, rushed. A key with no
// lease gets no hold: whatever is granted from now on renders the row as the rush left it.
func (o *Operate) apply(keys [][]byte, mode string) (int, error) {
	t := o.Targets
	if t.Locks != nil {
		defer t.Locks.Lock(keys)()
	}
	now := t.Now()
	writes := make([]store.Write, 0, len(keys))
	for _, k := range keys {
		row, err := t.Store.GetSchedule(k)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since the prefix scan
		}
		if err != nil {
			return 0, err
		}
		due, lanes := storedDue(row.DueAtMs, now), row.Lanes
		if mode == "rush" {
			due, lanes.Urgent = min(due, now), true
		}
		sch, err := store.NewSchedule(k, due, row.FromSitemap, row.EffectiveIntervalMs, lanes)
		if err != nil {
			return 0, err
		}
		writes = append(writes, store.Write{Schedule: sch, DropPage: mode == "wait"})
	}
	if len(writes) == 0 {
		return 0, nil
	}
	if err := t.Writer.WriteSchedules(writes); err != nil {
		return 0, err
	}
	if o.Seg != nil {
		leases, hold := o.Seg.Leases(), t.Policy().Config().Queue.ReleaseGrace.Ms()
		for _, w := range writes {
			h := shm.KeyHash(w.Schedule.Key())
			if li, ok := leases.Lookup(h, now); ok && !li.Released {
				leases.Revoke(h, now, hold)
			}
		}
	}
	return len(writes), nil
}

// PageCSP is the Content-Security-Policy of every stored page GET /v1/pages serves. A stored
// page is someone else's HTML served from the API's own origin, so it must not run there: no
// script of any kind (default-src 'none' and no script-src), and a sandbox without
// allow-scripts, allow-forms or allow-same-origin, which gives the document an opaque origin —
// even a request it could make would arrive cross-site and be refused by the listener. Images,
// styles and fonts may load from anywhere so that an operator who opens a page sees it as it
// looks; none of them can run code. frame-ancestors 'none' keeps the API's origin out of frames.
const PageCSP = "default-src 'none'; img-src * data:; style-src * 'unsafe-inline'; font-src * data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"

// page serves the stored page of ?url=&device= with its age. Within its cadence plus the
// route's stale-while-revalidate window it is served (X-Freshq-Stale says whether it is past
// its cadence); past the window the answer is 404 with the reason. Every page carries
// X-Content-Type-Options: nosniff and PageCSP, set after the page's own headers so that none
// of those can loosen them. A stored status that is not a final HTTP status (200–599) is
// answered 502 with a JSON error: a page stored by an older version or a faulty renderer is
// refused, not passed to WriteHeader, which panics on a code it cannot send.
func (o *Operate) page(w http.ResponseWriter, r *http.Request) {
	t := o.Targets
	pol := t.Policy()
	key, ok := keyOf(w, r, pol)
	if !ok {
		return
	}
	pg, err := t.Store.GetPage(key)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "url", "no rendered page")
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	row, err := t.Store.GetSchedule(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, "", err.Error())
		return
	}
	pr := rows.Policy(key, row)
	cadence, _ := pol.Cadence(&pr)
	_, swr := pol.RouteOf(key)
	age := t.Now() - pg.RenderedAtMs
	if age > cadence+swr {
		writeError(w, http.StatusNotFound, "url", fmt.Sprintf("page is %ds old, past its cadence (%ds) plus its swr window (%ds)",
			age/1000, cadence/1000, swr/1000))
		return
	}
	if !intake.FinalStatus(int(pg.Status)) {
		writeError(w, http.StatusBadGateway, "", fmt.Sprintf("the stored page has status %d, which is not a final HTTP status (200-599); it is not served until the page is rendered again", pg.Status))
		return
	}
	for _, h := range pg.Headers {
		w.Header().Set(h.Name, h.Value)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", PageCSP)
	w.Header().Set("Age", strconv.FormatInt(max(age, 0)/1000, 10))
	w.Header().Set("X-Freshq-Stale", strconv.FormatBool(age > cadence))
	w.WriteHeader(int(pg.Status))
	w.Write(pg.Body)
}
