package misses

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/render"
)

// Flights renders a missing page once for every request that waits for it (the crawler
// listener's miss, POST /v1/pages with ?wait=): render on miss, with one flight per key.
//
// The first request for a key that has no servable page registers a flight, files the target
// if it is unknown (as Discover does) and rushes it, unless a render of the key is in flight
// already (its lease is held): that render is the one waited for. The rush itself never
// revokes a render in flight (keepInFlight), so a render claimed between that look and the
// rush's write is waited for too, not fenced and rendered twice. Every request for the key that arrives before the result is applied joins
// the flight instead of rushing again. The Applier wakes the flight (Applied) once a result of
// the key is committed; each waiter then reads the page as GET /v1/pages does. In a cluster the
// key's owner may be another node, whose Applier this one never hears: Watch wakes the flight
// when it finds the page committed.
//
// Invariants:
//   - One rush per flight, and one flight per key at a time: flights is the only registry, and
//     it is changed under mu only.
//   - Bounded: at most ⌈queue.lanes.urgent_max_share × queue.ready.capacity⌉ flights (each is a
//     rush, which takes the urgent lane's share of a batch) and at most page.max_waiters
//     waiters at once, of which one site (Settings.SiteOf) holds at most page.max_site_waiters,
//     so that one site's misses (a stranger's made-up URLs of it, an origin that hangs) cannot
//     shut out another's. Past either, a request is refused at once with intake.ErrOverloaded rather
//     than queued.
//   - Nobody waits past the stop: Stop wakes every flight with intake.ErrStopping and refuses every
//     request from then on.
//   - A flight lives only while somebody waits on it: the last waiter to leave (timeout,
//     disconnect) removes it, so a render that never lands (its lease lapsed, the target was
//     deleted) holds no slot for good. A later request starts a new flight; it rushes again
//     only if no render of the key is in flight, so a render still running is not doubled.
//   - A result applied between a request's page read and its flight is not missed: the first
//     request reads the page again once its flight is registered, before it rushes.
//   - A known page whose last renders failed is not rushed while its failure backoff runs
//     (intake.ErrBackingOff): the policy's backoff holds however often a crawler retries it.
//   - Only pages of the hosts render.domains names are rendered on miss (an empty list names
//     none here, though the renderer reads it as any host), and a flight that would create a
//     target takes a token of its site's rate of new targets (serve.miss_rate, serve.miss_burst)
//     first, the site render.domains names (Settings.SiteOf: every port and subdomain of an
//     entry shares its bucket; the key's host is canonical, so no spelling has one of its own): a flood of unknown URLs can neither fill the store nor the urgent lane. A refusal
//     files nothing.
type Flights struct {
	Targets *intake.Targets // files, rushes and reads the pages waited for
	// Settings are render on miss's settings in force, read once per request.
	Settings func() *Settings
	// After is time.After; a test fires its own channel to end a wait without sleeping.
	After func(time.Duration) <-chan time.Time
	// Report, if set, is told the flights and the waiters after every change, under the lock
	// (so in order); worker 0 publishes them as gauges. It must not block.
	Report func(flights, waiters int)

	newTargets HostRate // new targets per site (Settings.SiteOf)

	mu          sync.Mutex
	flights     map[string]*flight
	waiters     int
	siteWaiters map[string]int // waiters by the site of their key (Settings.SiteOf)
	stopped     bool
}

// flight is one render waited for; done is closed once err (nil: a result was applied) is set.
type flight struct {
	done    chan struct{}
	err     error
	outcome string // the applied result's outcome
	waiters int
	started bool   // its first request has filed and rushed the target (or found it rendering)
	site    string // its key's site, whose share of the waiters its waiters count against
}

func (m *Flights) after(d time.Duration) <-chan time.Time {
	if m.After != nil {
		return m.After(d)
	}
	return time.After(d)
}

// Limits are the caps in force under the current configuration: flights and waiters at once.
func (m *Flights) Limits() (flights, waiters int) {
	l := m.Settings()
	return l.Flights, l.Waiters
}

// Wait returns the servable page of key (on url and device, as the request named them), and
// if there is none renders it on miss and waits up to wait for it. It returns the errors of
// Targets.Page and Discover, and:
//   - intake.ErrOverloaded at once when the flights or the waiters are at their cap;
//   - intake.ErrStopping when worker 0 stops (at once, or while waiting);
//   - intake.ErrWaitTimeout when wait passes before the render lands;
//   - intake.ErrRenderFailed when the render landed without a servable page (its outcome says why);
//   - ctx's error when the caller gives up (a client that disconnected): it leaves the flight.
func (m *Flights) Wait(ctx context.Context, key []byte, url, device string, wait time.Duration) (intake.ServedPage, error) {
	pg, err := m.Targets.Page(key)
	if !errors.Is(err, intake.ErrNotFound) {
		return pg, err // served, or a failure that rendering would not mend
	}
	f, first, err := m.join(string(key))
	if err != nil {
		return intake.ServedPage{}, err
	}
	if first {
		if pg, err := m.start(key, url, device); err == nil || !errors.Is(err, intake.ErrNotFound) {
			m.finish(string(key), f, err, "")
			if err == nil {
				m.leave(string(key), f) // the page landed before the flight: no render needed
				return pg, nil
			}
		}
		m.mu.Lock()
		f.started = true
		m.mu.Unlock()
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		m.leave(string(key), f)
		return intake.ServedPage{}, fmt.Errorf("intake: waiting for %q: %w", key, ctx.Err())
	case <-m.after(wait):
		m.leave(string(key), f)
		// A page another node applied (a cluster: the key's shard is rendered by its owner,
		// whose Applier wakes no flight here) is served all the same, if late.
		if pg, err := m.Targets.Page(key); err == nil {
			return pg, nil
		}
		return intake.ServedPage{}, intake.NewKindError(intake.ErrWaitTimeout, fmt.Sprintf("the page was not rendered within %s", wait))
	}
	m.leave(string(key), f)
	if f.err != nil {
		return intake.ServedPage{}, f.err
	}
	pg, err = m.Targets.Page(key)
	if errors.Is(err, intake.ErrNotFound) {
		// Not wrapping err: the answer is the render's failure, not a missing page.
		return intake.ServedPage{}, intake.NewKindError(intake.ErrRenderFailed,
			fmt.Sprintf("the render ended %s without a servable page", f.outcome))
	}
	return pg, err
}

// join registers the caller on key's flight, starting one if there is none (first), or
// refuses it past a cap or after Stop.
func (m *Flights) join(key string) (f *flight, first bool, err error) {
	set := m.Settings()
	maxFlights, maxWaiters, maxSite := set.Flights, set.Waiters, set.SiteWaiters
	site := set.SiteOf([]byte(key))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil, false, errStopping
	}
	if m.waiters >= maxWaiters {
		return nil, false, intake.NewKindError(intake.ErrOverloaded, fmt.Sprintf("%d requests are waiting for renders already (page.max_waiters)", m.waiters))
	}
	if maxSite > 0 && m.siteWaiters[site] >= maxSite {
		return nil, false, intake.NewKindError(intake.ErrOverloaded, fmt.Sprintf(
			"%d requests are waiting for renders of %s already, its share of the waiters (page.max_site_waiters)", m.siteWaiters[site], site))
	}
	f = m.flights[key]
	if f == nil {
		if len(m.flights) >= maxFlights {
			return nil, false, intake.NewKindError(intake.ErrOverloaded, fmt.Sprintf(
				"%d renders on miss are in flight already, the urgent lane's share (queue.lanes.urgent_max_share × queue.ready.capacity)", len(m.flights)))
		}
		if m.flights == nil {
			m.flights = map[string]*flight{}
		}
		f, first = &flight{done: make(chan struct{}), site: site}, true
		m.flights[key] = f
	}
	if m.siteWaiters == nil {
		m.siteWaiters = map[string]int{}
	}
	f.waiters++
	m.waiters++
	m.siteWaiters[f.site]++
	m.report()
	return f, first, nil
}

// start is the first request's part: the page read again (a result may have landed since the
// first read), then the target filed if unknown and rushed, unless its render is in flight.
// It returns the page if it is servable now, intake.ErrNotFound once the render is on its way, or
// the failure that kept it from starting.
func (m *Flights) start(key []byte, url, device string) (intake.ServedPage, error) {
	t := m.Targets
	if pg, err := t.Page(key); !errors.Is(err, intake.ErrNotFound) {
		return pg, err
	}
	set := m.Settings()
	host := string(cachekey.Host(key))
	if len(set.Domains) == 0 || !render.Allowed(set.Domains, host) {
		return intake.ServedPage{}, intake.NewFieldError("url", intake.NewKindError(intake.ErrHostNotAllowed, fmt.Sprintf(
			"no page stored, and %s is not a host render.domains names: only those are rendered on miss", host)))
	}
	known, err := t.BackingOff(key)
	switch {
	case err != nil:
		return intake.ServedPage{}, err
	case !known:
		site := set.SiteOf(key) // one bucket per site: no spelling, port or subdomain has its own
		if ok, after := m.newTargets.Take(site, t.Now(), set.Rate, set.Burst); !ok {
			return intake.ServedPage{}, &intake.RateLimitedError{Host: site, RetryAfterSec: after}
		}
	}
	if _, _, err := t.Discover(url, device); err != nil {
		return intake.ServedPage{}, err
	}
	if t.Rendering(key) {
		return intake.ServedPage{}, intake.ErrNotFound // rendering now: wait for that render
	}
	if _, err := t.RushForReader(key); err != nil {
		return intake.ServedPage{}, err
	}
	return intake.ServedPage{}, intake.ErrNotFound
}

// finish ends f, if it is still key's flight, with err (nil: a result was applied, whose
// outcome is given) and wakes its waiters.
func (m *Flights) finish(key string, f *flight, err error, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.flights[key] != f {
		return
	}
	delete(m.flights, key)
	f.err, f.outcome = err, outcome
	close(f.done)
	m.report()
}

// leave takes a waiter off f; the last one to leave removes f if it is still registered.
func (m *Flights) leave(key string, f *flight) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f.waiters--
	m.waiters--
	if m.siteWaiters[f.site]--; m.siteWaiters[f.site] <= 0 {
		delete(m.siteWaiters, f.site)
	}
	if f.waiters == 0 && m.flights[key] == f {
		delete(m.flights, key)
	}
	m.report()
}

// report tells Report the counts; m.mu is held.
func (m *Flights) report() {
	if m.Report != nil {
		m.Report(len(m.flights), m.waiters)
	}
}

// Applied wakes the flight of key, if any: a result of it (with outcome) has been committed.
// The Applier calls it after the commit; it never blocks. Safe on a nil *Flights.
func (m *Flights) Applied(key []byte, outcome string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	f := m.flights[string(key)]
	m.mu.Unlock()
	if f != nil {
		m.finish(string(key), f, nil, outcome)
	}
}

// Stop wakes every flight with intake.ErrStopping and refuses every request from then on; worker 0
// calls it before it drains its requests, so that no waiter holds the drain up. Safe twice
// and on a Flights never used.
func (m *Flights) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	for key, f := range m.flights {
		delete(m.flights, key)
		f.err = errStopping
		close(f.done)
	}
	m.report()
}

// Waiting reports the flights whose render has been asked for (the target filed and rushed,
// or found rendering) and the requests waiting, at this moment. A test waits on it to know
// that the requests it started have reached their flight.
func (m *Flights) Waiting() (started, waiters int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.flights {
		if f.started {
			started++
		}
	}
	return started, m.waiters
}

var errStopping = intake.NewKindError(intake.ErrStopping, "worker 0 is stopping; retry shortly")

// Watch wakes, until ctx ends, every flight whose page another process committed: each period
// it asks present which of the flights' keys have a page row (one question for all of them),
// and wakes the flights of those whose page is servable now. It is how a waiter on one node of
// a cluster is answered when the key's owner, another node, renders it: that node's Applier
// wakes no flight here. A page is therefore answered within period (plus the read) of its
// commit. Only flights whose first request has filed and rushed are asked about, at most the
// flight cap of them.
func (m *Flights) Watch(ctx context.Context, period time.Duration, present func(ctx context.Context, keys [][]byte) ([][]byte, error)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		keys := make([][]byte, 0, len(m.flights))
		for k, f := range m.flights {
			if f.started {
				keys = append(keys, []byte(k))
			}
		}
		m.mu.Unlock()
		if len(keys) == 0 {
			continue
		}
		found, err := present(ctx, keys)
		if err != nil {
			continue // the next period asks again; a waiter's own end reads the page once more
		}
		for _, k := range found {
			if _, err := m.Targets.Page(k); err != nil {
				continue // not servable (yet): its own result, or the wait's end, answers it
			}
			m.mu.Lock()
			f := m.flights[string(k)]
			m.mu.Unlock()
			if f != nil {
				m.finish(string(k), f, nil, "ok")
			}
		}
	}
}
