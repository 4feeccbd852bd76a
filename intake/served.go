package intake

import (
	"errors"
	"fmt"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// The crawler listener's reads and its one bounded write (package serve). A crawler is served
// the freshest page there is: a page past its cadence plus swr is still served, marked, unless
// its route says serve_stale: false, and its row is moved up (RushStale).

// StoredPage is the freshest stored page of a key, whatever its age, with what the crawler
// listener needs to decide how to serve it.
type StoredPage struct {
	ServedPage
	Expired    bool // past its cadence plus the route's swr window
	ServeStale bool // its route serves it even when expired (routes[].serve_stale, true unless false)
	Urgent     bool // its row is rushed already: moving it up again would change nothing
}

// Stored returns the stored page of key whatever its age, or a *FieldError naming "url" that
// matches ErrNotFound when there is none, ErrBadStoredPage for a status HTTP cannot send, or a
// *StoreError. It takes no lock and writes nothing: two reads of committed state. The page's
// body may be the store's own memory (store.SharedPageReader): the caller must not modify it.
func (t *Targets) Stored(key []byte) (StoredPage, error) {
	set := t.Settings()
	pol := set.Policy
	var pg store.Page
	var err error
	if shared, ok := t.store.(store.SharedPageReader); ok {
		pg, err = shared.GetPageShared(key) // served as stored, never modified
	} else {
		pg, err = t.store.GetPage(key)
	}
	if errors.Is(err, store.ErrNotFound) {
		return StoredPage{}, fieldErr("url", &kindError{kind: ErrNotFound, msg: "no rendered page"})
	}
	if err != nil {
		return StoredPage{}, &StoreError{err}
	}
	if !FinalStatus(int(pg.Status)) {
		return StoredPage{}, &kindError{kind: ErrBadStoredPage, msg: fmt.Sprintf(
			"the stored page has status %d, which is not a final HTTP status (200-599); it is not served until the page is rendered again", pg.Status)}
	}
	row, err := t.store.GetSchedule(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return StoredPage{}, &StoreError{err}
	}
	pr := policy.Row{Key: key, Row: row}
	kr := set.Resolve(key)
	cadence, _ := pol.CadenceOf(&pr, kr.Policy)
	age := t.Now() - pg.RenderedAtMs
	return StoredPage{
		ServedPage: ServedPage{Page: pg, AgeMs: age, Stale: age > cadence},
		Expired:    age > cadence+kr.Policy.SWRMs,
		ServeStale: kr.ServeStale(),
		Urgent:     row.Lanes.Urgent,
	}, nil
}

// Known reports whether key is a stored target, and the status and time (ms) of its last
// render (0 if none): a page that rendered as a 404 stores no page, and the crawler listener
// answers its status rather than rendering it again on every request.
func (t *Targets) Known(key []byte) (known bool, lastStatus int, lastAtMs int64, err error) {
	if _, err := t.store.GetSchedule(key); errors.Is(err, store.ErrNotFound) {
		return false, 0, 0, nil
	} else if err != nil {
		return false, 0, 0, &StoreError{err}
	}
	tgt, err := t.store.GetTarget(key)
	if errors.Is(err, store.ErrNotFound) {
		return true, 0, 0, nil
	}
	if err != nil {
		return true, 0, 0, &StoreError{err}
	}
	return true, int(tgt.LastRender.Status), tgt.LastRender.AtMs, nil
}

// CadenceOf is the cadence (ms) in force for key's row, for how long a remembered answer holds.
func (t *Targets) CadenceOf(key []byte) int64 {
	row, _ := t.store.GetSchedule(key)
	pr := policy.Row{Key: key, Row: row}
	c, _ := t.Policy().Cadence(&pr)
	return c
}

// RushStale moves the row of key up (a rush, as POST /v1/prioritize does), unless it is urgent
// already or a render of it is in flight: the crawler listener calls it for an expired page it
// served. It returns whether it rushed. The caller bounds how often (package serve).
func (t *Targets) RushStale(key []byte) (bool, error) {
	if li, ok := t.seg.Leases().Lookup(shm.KeyHash(key), t.Now()); ok && !li.Released {
		return false, nil
	}
	row, err := t.store.GetSchedule(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, &StoreError{err}
	}
	if row.Lanes.Urgent {
		return false, nil
	}
	n, err := t.prioritize([][]byte{key}, "rush", keepInFlight)
	if err != nil {
		return false, &StoreError{err}
	}
	return n == 1, nil
}
