package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// Result is one render attempt's outcome as it travels to worker 0.
type Result struct {
	Key        []byte            `json:"key"`
	Outcome    string            `json:"outcome"` // render.Outcome.String()
	Status     int               `json:"status,omitempty"`
	Stage      string            `json:"stage,omitempty"`
	DurationMs int64             `json:"duration_ms"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       []byte            `json:"body,omitempty"`
	Err        string            `json:"err,omitempty"`
	Lease      Lease             `json:"lease"`
}

// Lease is a shm.Lease on the wire.
type Lease struct {
	Slot    uint32 `json:"slot"`
	State   uint64 `json:"state"`
	KeyHash uint64 `json:"key_hash"`
}

func wireLease(l shm.Lease) Lease { return Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash} }
func (l Lease) shm() shm.Lease    { return shm.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash} }

// Writer is the funnel's batched write.
type Writer interface {
	WriteSchedules([]store.Write) error
}

// Applier writes results in worker 0: each result becomes one funnel write (its reschedule,
// its target and its page in one transaction), a batch becomes one WriteSchedules call, and
// only after it commits are the leases released, with the commit-visibility grace. A result is
// at-least-once: applying one twice reschedules the row twice, which is harmless.
type Applier struct {
	Store  *store.Store // reads
	Writer Writer       // writes; nil means Store. Worker 0 passes sweep.Changes' wrapper
	Locks  *KeyLocks    // shared with every other read-decide-write of worker 0; nil: none
	Seg    *shm.Segment
	Policy func() *policy.Policy
	Now    func() int64
	Log    zerolog.Logger

	afterDecide func() // test hook: between the reads and the commit
}

// ApplyStats counts what a batch did.
type ApplyStats struct {
	Applied int `json:"applied"`
	Skipped int `json:"skipped"` // the row was deleted while it rendered
}

// Apply applies a batch. It fails as a whole (nothing written, no lease released) only if the
// store cannot read or commit; the caller retries.
func (a *Applier) Apply(results []Result) (ApplyStats, error) {
	if a.Locks != nil {
		keys := make([][]byte, len(results))
		for i := range results {
			keys[i] = results[i].Key
		}
		defer a.Locks.Lock(keys)()
	}
	pol := a.Policy()
	now := a.Now()
	var st ApplyStats
	writes := make([]store.Write, 0, len(results))
	release := make([]shm.Lease, 0, len(results))
	for i := range results {
		w, ok, err := a.decide(pol, &results[i], now)
		if err != nil {
			return ApplyStats{}, err
		}
		if !ok {
			st.Skipped++
			release = append(release, results[i].Lease.shm())
			continue
		}
		writes = append(writes, w)
		release = append(release, results[i].Lease.shm())
	}
	if a.afterDecide != nil {
		a.afterDecide()
	}
	var w Writer = a.Store
	if a.Writer != nil {
		w = a.Writer
	}
	if err := w.WriteSchedules(writes); err != nil {
		return ApplyStats{}, fmt.Errorf("api: apply %d results: %w", len(writes), err)
	}
	grace := pol.Config().Queue.ReleaseGrace.Ms()
	leases := a.Seg.Leases()
	for _, l := range release {
		leases.Release(l, now, grace)
	}
	st.Applied = len(writes)
	return st, nil
}

// decide turns one result into its funnel write. ok is false when the row no longer exists.
func (a *Applier) decide(pol *policy.Policy, r *Result, now int64) (store.Write, bool, error) {
	row, err := a.Store.GetSchedule(r.Key)
	if errors.Is(err, store.ErrNotFound) {
		return store.Write{}, false, nil // deleted while rendering: a result must not resurrect it
	}
	if err != nil {
		return store.Write{}, false, fmt.Errorf("api: result for %q: %w", r.Key, err)
	}
	t, err := a.Store.GetTarget(r.Key)
	if errors.Is(err, store.ErrNotFound) {
		t = targetFromKey(r.Key, row.FromSitemap)
	} else if err != nil {
		return store.Write{}, false, fmt.Errorf("api: result for %q: %w", r.Key, err)
	}
	d := pol.Apply(policy.State{
		Key:              r.Key,
		FromSitemap:      row.FromSitemap,
		CarriedMs:        row.EffectiveIntervalMs,
		StoredIntervalMs: row.StoredIntervalMs,
		DemandRung:       t.DemandRung,
		FailCount:        t.Failures.Count,
		FailClass:        t.Failures.LastClass,
		FailFirstMs:      t.Failures.FirstMs,
		NeverRendered:    row.NeverRendered,
	}, r.Outcome, now)

	sch, err := store.NewSchedule(r.Key, d.DueAtMs, row.FromSitemap, d.CadenceMs,
		store.Lanes{NeverRendered: d.NeverRendered, Failing: d.Failing})
	if err != nil {
		return store.Write{}, false, fmt.Errorf("api: result for %q: %w", r.Key, err)
	}
	t.DemandRung = d.DemandRung
	t.Failures = store.Failures{Count: d.FailCount, LastClass: d.FailClass, FirstMs: d.FailFirstMs, LastMs: d.FailLastMs}
	t.Terminal, t.TerminalRecheckMs = terminalOf(d.Terminal), d.RecheckAtMs
	t.LastRender = store.RenderSummary{Status: uint16(r.Status), AtMs: now, DurationMs: r.DurationMs, Bytes: uint64(len(r.Body))}
	w := store.Write{Schedule: sch, Target: &t}
	if d.StorePage {
		w.Page = &store.Page{Status: uint16(r.Status), Headers: pageHeaders(r.Headers), Body: r.Body, RenderedAtMs: now}
	}
	return w, true, nil
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
	for _, name := range []string{"content-type", "content-language", "last-modified", "etag", "cache-control"} {
		if v, ok := h[name]; ok && len(out) < store.MaxPageHeaders {
			out = append(out, store.Header{Name: name, Value: v})
		}
	}
	return out
}

// targetFromKey rebuilds a minimal target for a row that has none (a row filed without one).
func targetFromKey(key []byte, fromSitemap bool) store.Target {
	device, url, ok := strings.Cut(string(key), "|")
	if !ok {
		device, url = "", string(key)
	}
	src := store.SourceDiscovered
	if fromSitemap {
		src = store.SourceSitemap
	}
	return store.Target{URL: url, Device: device, Source: src}
}
