package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// Limits of POST /v1/targets beyond the wire's (wire.MaxTargetsBody, wire.MaxTargetItem).
const (
	// targetsHeld is what one upload holds in memory however long it is (a chunk of parsed
	// items with their keys, one item, the reader's buffer): its weight for the Limiter.
	targetsHeld  = 5 << 20
	targetsChunk = 1000 // items per funnel batch
)

// Targets serves /v1/targets.
type Targets struct {
	Store  *store.Store
	Writer intake.Writer    // every write of worker 0 goes through sweep.Changes' wrapper
	Locks  *intake.KeyLocks // shared with the Applier
	Policy func() *policy.Policy
	Now    func() int64
	Limit  *Limiter // heavy requests of worker 0; nil: none
}

// Register adds the endpoints to mux.
func (t *Targets) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/targets", t.Limit.Wrap(targetsHeld, http.HandlerFunc(t.post)))
}

// Devices a target may name: desktop and mobile, plus every device of render.user_agents.
func devices(cfg *config.Config) map[string]bool {
	d := map[string]bool{"desktop": true, "mobile": true}
	for k := range cfg.Render.UserAgents {
		d[k] = true
	}
	return d
}

// post upserts targets from a JSON array, NDJSON, or any whitespace-separated JSON objects (so
// one pretty-printed object is one item). Each item is validated on its own: a bad one is
// rejected with the field it got wrong, the good ones land. Each landed item is one funnel
// write (row, index entry and target in one transaction), so nothing is half-written. Items
// are merged with what is stored in chunks, each under the locks of its keys (KeyLocks); a
// key repeated within a chunk is merged over its earlier item before the chunk is written.
func (t *Targets) post(w http.ResponseWriter, r *http.Request) {
	pol := t.Policy()
	devs := devices(pol.Config())
	body := http.MaxBytesReader(w, r.Body, wire.MaxTargetsBody)
	var resp wire.TargetsResponse
	reject := func(i int, field, msg string) {
		resp.Rejected++
		if len(resp.Errors) < intake.MaxReportErrors {
			resp.Errors = append(resp.Errors, wire.ItemError{Index: i, Field: field, Error: msg})
		}
	}
	chunk := make([]parsedItem, 0, targetsChunk)
	inChunk := make(map[string]int, targetsChunk)
	next := 0        // the index of the next item to read
	chunkMerged := 0 // merges into the chunk being gathered, counted in resp.Merged
	failedAt := -1   // the first item of the chunk the store failed
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		n, err := t.upsert(chunk, reject)
		resp.Accepted += n
		if err != nil {
			// Nothing of the chunk landed: neither its first item nor its merges.
			failedAt, resp.Merged = chunk[0].index, resp.Merged-chunkMerged
		}
		chunk, chunkMerged = chunk[:0], 0
		clear(inChunk)
		return err
	}
	err := wire.DecodeTargetItems(body, func(i int, item *wire.TargetItem, decodeErr error) error {
		next = i + 1
		if decodeErr != nil {
			reject(i, wire.FieldOf(decodeErr), decodeErr.Error())
			return nil
		}
		p, field, err := parseItem(item, devs)
		if err != nil {
			reject(i, field, err.Error())
			return nil
		}
		p.index = i
		if j, ok := inChunk[string(p.key)]; ok {
			chunk[j].mergeOver(&p)
			resp.Merged++
			chunkMerged++
			return nil
		}
		inChunk[string(p.key)] = len(chunk)
		chunk = append(chunk, p)
		if len(chunk) == targetsChunk {
			return flush()
		}
		return nil
	})
	var stored *storeError
	if !errors.As(err, &stored) {
		// The items read before a malformed or oversized stretch land: the answer says where
		// the body stopped, and everything before it was handled.
		if ferr := flush(); ferr != nil {
			err = ferr
		}
	}
	if err == nil {
		code := http.StatusOK
		if resp.Accepted == 0 && resp.Rejected > 0 {
			code = http.StatusBadRequest
			resp.Error = fmt.Sprintf("no item accepted: all %d were rejected (errors lists the first by index)", resp.Rejected)
		}
		writeJSON(w, code, resp)
		return
	}
	resp.StoppedAt = &next
	var tooBig *http.MaxBytesError
	var bad *wire.BodyError
	code := http.StatusBadRequest
	switch {
	case errors.As(err, &tooBig):
		code = http.StatusRequestEntityTooLarge
		resp.Error = fmt.Sprintf("body over %d bytes; split the upload", wire.MaxTargetsBody)
	case errors.As(err, &bad):
		resp.Error, resp.StoppedAt = bad.Error(), &bad.Index
	case errors.As(err, &stored):
		code = http.StatusServiceUnavailable
		resp.Error, resp.StoppedAt = stored.Error(), &failedAt
	default:
		resp.Error = "reading the body: " + err.Error()
	}
	writeJSON(w, code, resp)
}

// storeError is a funnel failure while upserting: the request stops there.
type storeError struct{ err error }

// Error names the store once: the funnel's errors already start with "store:".
func (e *storeError) Error() string {
	if msg := e.err.Error(); strings.HasPrefix(msg, "store:") {
		return msg
	}
	return "store: " + e.err.Error()
}
func (e *storeError) Unwrap() error { return e.err }

// upsert merges a chunk of valid items with the stored rows and targets and writes them in one
// funnel call, holding the chunk's key locks from the first read to the commit. It returns the
// number of items that landed (an item merged into another counts: it landed in that write).
func (t *Targets) upsert(chunk []parsedItem, reject func(i int, field, msg string)) (int, error) {
	if t.Locks != nil {
		keys := make([][]byte, len(chunk))
		for i := range chunk {
			keys[i] = chunk[i].key
		}
		defer t.Locks.Lock(keys)()
	}
	now := t.Now()
	writes := make([]store.Write, 0, len(chunk))
	items := 0
	for i := range chunk {
		wr, err := t.merge(&chunk[i], now)
		if err != nil {
			for _, j := range chunk[i].indices() {
				reject(j, "", err.Error())
			}
			continue
		}
		writes = append(writes, wr)
		items += 1 + len(chunk[i].merged)
	}
	if len(writes) == 0 {
		return 0, nil
	}
	if err := t.Writer.WriteSchedules(writes); err != nil {
		return 0, &storeError{err}
	}
	return items, nil
}

// errBadJSON is wrapped by every BodyError.
// parseInterval reads an interval given as a duration string or a number of seconds.
func parseInterval(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		d, err := config.ParseDuration(s)
		if err != nil {
			return 0, errors.New("unparsable duration (use e.g. 6h, 7d, 90m)")
		}
		return d.Ms(), nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return 0, errors.New("must be a duration string or a number of seconds")
	}
	return int64(secs * 1000), nil
}

var sources = map[string]store.Source{"sitemap": store.SourceSitemap, "discovered": store.SourceDiscovered, "api": store.SourceAPI}

// ValidateTargetItem checks one item against the devices allowed (desktop, mobile, and the keys
// of render.user_agents) and returns its cache key, or the field it got wrong with an error.
func ValidateTargetItem(it *wire.TargetItem, devices map[string]bool) (key []byte, field string, err error) {
	p, field, err := parseItem(it, devices)
	return p.key, field, err
}

// parsedItem is a validated item, not yet merged with what is stored.
type parsedItem struct {
	index     int
	merged    []int // indices of later items of the same key merged over this one, in order
	key       []byte
	url       string
	device    string
	source    store.Source
	sourceSet bool
	interval  int64 // -1: not given
	due       int64 // -1: not given
}

// mergeOver folds a later item of the same key into p: what the later item gives wins, what
// it omits keeps p's value, exactly as if the two had been posted one after the other.
func (p *parsedItem) mergeOver(later *parsedItem) {
	p.merged = append(p.merged, later.index)
	if later.sourceSet {
		p.source, p.sourceSet = later.source, true
	}
	if later.interval >= 0 {
		p.interval = later.interval
	}
	if later.due >= 0 {
		p.due = later.due
	}
}

// indices are the request indices of the items p stands for.
func (p *parsedItem) indices() []int { return append([]int{p.index}, p.merged...) }

// parseItem validates one item without reading the store, returning the offending field with an
// error.
func parseItem(it *wire.TargetItem, devs map[string]bool) (parsedItem, string, error) {
	p := parsedItem{interval: -1, due: -1, source: store.SourceAPI}
	u, err := cachekey.NormalizeURL(it.URL)
	if err != nil {
		return p, "url", err
	}
	p.url, p.device = u, it.Device
	if p.device == "" {
		p.device = "desktop"
	}
	if !devs[p.device] {
		return p, "device", fmt.Errorf("unknown device %q", p.device)
	}
	p.key = cachekey.New(p.device, u)
	if len(p.key) > store.MaxKeyLen {
		return p, "url", fmt.Errorf("cache key of %d bytes is longer than the limit of %d", len(p.key), store.MaxKeyLen)
	}
	if it.Source != "" {
		src, ok := sources[it.Source]
		if !ok {
			return p, "source", fmt.Errorf("must be sitemap, discovered or api, got %q", it.Source)
		}
		p.source, p.sourceSet = src, true
	}
	if len(it.Interval) > 0 && string(it.Interval) != "null" {
		if p.interval, err = parseInterval(it.Interval); err != nil {
			return p, "interval", err
		}
		if p.interval < policy.MinCadence.Milliseconds() || p.interval > policy.MaxCadence.Milliseconds() {
			return p, "interval", fmt.Errorf("must be between %s and %s", policy.MinCadence, policy.MaxCadence)
		}
	}
	if it.Due != "" {
		tm, err := time.Parse(time.RFC3339, it.Due)
		if err != nil {
			return p, "due", errors.New("must be an RFC 3339 time, e.g. 2026-11-30T12:00:00Z")
		}
		if ms := tm.UnixMilli(); ms < store.MinDueMs || ms > store.MaxDueMs {
			return p, "due", fmt.Errorf("must be between %s and %s",
				time.UnixMilli(store.MinDueMs).UTC().Format(time.RFC3339), time.UnixMilli(store.MaxDueMs).UTC().Format(time.RFC3339))
		}
		p.due = tm.UnixMilli()
	}
	return p, "", nil
}

// storedDue is a stored due time as a write keeps it. A row stored by an older version may
// hold one out of [store.MinDueMs, store.MaxDueMs] (1970, or a typo centuries ahead), which
// the funnel now refuses: such a row is taken as due now, the deadline it was meant to have
// passed, so that every write keeping its due time (an upload that omits due, a sitemap run,
// a rush, a wait) lands instead of failing its whole batch.
func storedDue(stored, now int64) int64 {
	if !store.PlausibleDue(stored) {
		return now
	}
	return stored
}

// merge turns a valid item into its funnel write, merging with the stored row and target: what
// the item leaves out keeps its stored value (due, cadence, source), so a re-import never resets
// a due time, erases a cadence or turns a sitemap target into an API one.
func (t *Targets) merge(p *parsedItem, now int64) (store.Write, error) {
	row, err := t.Store.GetSchedule(p.key)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Write{}, fmt.Errorf("reading the stored row: %v", err)
	}
	tgt, err := t.Store.GetTarget(p.key)
	hasTarget := err == nil
	if errors.Is(err, store.ErrNotFound) {
		tgt = store.Target{}
	} else if err != nil {
		return store.Write{}, fmt.Errorf("reading the stored target: %v", err)
	}
	tgt.URL, tgt.Device = p.url, p.device
	if p.sourceSet || !hasTarget {
		tgt.Source = p.source
	}
	fromSitemap := tgt.Source.Submitted()
	if exists && !p.sourceSet {
		fromSitemap = row.FromSitemap
	}
	lanes := store.Lanes{NeverRendered: true}
	carried, due := int64(0), p.due
	if exists {
		lanes, carried = row.Lanes, row.EffectiveIntervalMs
		if due < 0 {
			due = storedDue(row.DueAtMs, now)
		}
	}
	if due < 0 {
		due = now
	}
	if p.interval >= 0 {
		carried, tgt.StoredIntervalMs = p.interval, p.interval
	}
	sch, err := store.NewSchedule(p.key, due, fromSitemap, carried, lanes)
	if err != nil {
		return store.Write{}, err
	}
	return store.Write{Schedule: sch, Target: &tgt}, nil
}
