package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Public API limits.
const (
	maxTargetsBody  = 64 << 20 // one POST /v1/targets request
	targetsChunk    = 1000     // items per funnel batch
	maxReportErrors = 20       // errors listed in a response, by index
)

// TargetItem is one item of POST /v1/targets.
type TargetItem struct {
	URL      string          `json:"url"`
	Device   string          `json:"device,omitempty"`   // default "desktop"
	Interval json.RawMessage `json:"interval,omitempty"` // "6h", "7d", or seconds; default: keep, or resolve from routes
	Source   string          `json:"source,omitempty"`   // sitemap | discovered | api (default api)
	Due      string          `json:"due,omitempty"`      // RFC 3339; default: keep, or now for a new target
}

// ItemError names the field of one rejected item.
type ItemError struct {
	Index int    `json:"index"`
	Field string `json:"field"`
	Error string `json:"error"`
}

// TargetsResponse answers POST /v1/targets.
type TargetsResponse struct {
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Errors   []ItemError `json:"errors,omitempty"` // the first few, by item index
}

// Targets serves /v1/targets.
type Targets struct {
	Store  *store.Store
	Writer Writer    // every write of worker 0 goes through sweep.Changes' wrapper
	Locks  *KeyLocks // shared with the Applier
	Policy func() *policy.Policy
	Now    func() int64
}

// Register adds the endpoints to mux.
func (t *Targets) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/targets", t.post)
}

// Devices a target may name: desktop and mobile, plus every device of render.user_agents.
func devices(cfg *config.Config) map[string]bool {
	d := map[string]bool{"desktop": true, "mobile": true}
	for k := range cfg.Render.UserAgents {
		d[k] = true
	}
	return d
}

// post upserts targets from a JSON array or an NDJSON stream. Each item is validated on its own:
// a bad one is rejected with the field it got wrong, the good ones land. Each landed item is one
// funnel write (row, index entry and target in one transaction), so nothing is half-written.
// Items are merged with what is stored in chunks, each under the locks of its keys (KeyLocks).
func (t *Targets) post(w http.ResponseWriter, r *http.Request) {
	pol := t.Policy()
	devs := devices(pol.Config())
	body := http.MaxBytesReader(w, r.Body, maxTargetsBody)
	var resp TargetsResponse
	reject := func(i int, field, msg string) {
		resp.Rejected++
		if len(resp.Errors) < maxReportErrors {
			resp.Errors = append(resp.Errors, ItemError{Index: i, Field: field, Error: msg})
		}
	}
	chunk := make([]parsedItem, 0, targetsChunk)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		n, err := t.upsert(chunk, reject)
		resp.Accepted += n
		chunk = chunk[:0]
		return err
	}
	err := DecodeTargetItems(body, func(i int, item *TargetItem, decodeErr error) error {
		if decodeErr != nil {
			reject(i, "", decodeErr.Error())
			return nil
		}
		p, field, err := parseItem(item, devs)
		if err != nil {
			reject(i, field, err.Error())
			return nil
		}
		p.index = i
		chunk = append(chunk, p)
		if len(chunk) == targetsChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "", fmt.Sprintf("body over %d bytes; split the upload (%d items landed before the limit)", maxTargetsBody, resp.Accepted))
		return
	case errors.Is(err, errBadJSON):
		writeError(w, http.StatusBadRequest, "", err.Error())
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "", fmt.Sprintf("store: %v (%d items landed before it)", err, resp.Accepted))
		return
	}
	code := http.StatusOK
	if resp.Accepted == 0 && resp.Rejected > 0 {
		code = http.StatusBadRequest
	}
	writeJSON(w, code, resp)
}

// upsert merges a chunk of valid items with the stored rows and targets and writes them in one
// funnel call, holding the chunk's key locks from the first read to the commit.
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
	for i := range chunk {
		wr, err := t.merge(&chunk[i], now)
		if err != nil {
			reject(chunk[i].index, "", err.Error())
			continue
		}
		writes = append(writes, wr)
	}
	if len(writes) == 0 {
		return 0, nil
	}
	if err := t.Writer.WriteSchedules(writes); err != nil {
		return 0, err
	}
	return len(writes), nil
}

var errBadJSON = errors.New("bad JSON")

// DecodeTargetItems streams the items of a JSON array or of NDJSON, calling fn for each. An item
// that is not a valid object is passed with its decode error; a body that is not JSON at all
// stops with an error wrapping errBadJSON.
func DecodeTargetItems(r io.Reader, fn func(i int, item *TargetItem, err error) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := peekNonSpace(br)
	if err == io.EOF {
		return fmt.Errorf("%w: empty body", errBadJSON)
	}
	if err != nil {
		return err
	}
	if first == '[' {
		dec := json.NewDecoder(br)
		dec.DisallowUnknownFields()
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("%w: %v", errBadJSON, err)
		}
		for i := 0; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fmt.Errorf("%w: item %d: %v", errBadJSON, i, err)
			}
			item, err := decodeItem(raw)
			if err := fn(i, item, err); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 0; ; i++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			item, derr := decodeItem(line)
			if ferr := fn(i, item, derr); ferr != nil {
				return ferr
			}
		} else {
			i--
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, br.UnreadByte()
		}
	}
}

func decodeItem(raw []byte) (*TargetItem, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var it TargetItem
	if err := dec.Decode(&it); err != nil {
		return nil, fmt.Errorf("not a target object: %v", err)
	}
	return &it, nil
}

// NormalizeURL checks that raw is an absolute http(s) URL and returns its canonical form:
// lower-case scheme and host, no fragment, "/" for an empty path.
func NormalizeURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("not a URL: %v", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" || u.User != nil {
		return "", errors.New("must be an absolute http(s) URL without credentials")
	}
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

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
func ValidateTargetItem(it *TargetItem, devices map[string]bool) (key []byte, field string, err error) {
	p, field, err := parseItem(it, devices)
	return p.key, field, err
}

// parsedItem is a validated item, not yet merged with what is stored.
type parsedItem struct {
	index    int
	key      []byte
	url      string
	device   string
	source   store.Source
	interval int64 // -1: not given
	due      int64 // -1: not given
}

// parseItem validates one item without reading the store, returning the offending field with an
// error.
func parseItem(it *TargetItem, devs map[string]bool) (parsedItem, string, error) {
	p := parsedItem{interval: -1, due: -1}
	u, err := NormalizeURL(it.URL)
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
	p.key = []byte(p.device + "|" + u)
	if len(p.key) > store.MaxKeyLen {
		return p, "url", fmt.Errorf("cache key of %d bytes is longer than the limit of %d", len(p.key), store.MaxKeyLen)
	}
	srcName := it.Source
	if srcName == "" {
		srcName = "api"
	}
	src, ok := sources[srcName]
	if !ok {
		return p, "source", fmt.Errorf("must be sitemap, discovered or api, got %q", it.Source)
	}
	p.source = src
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
		if err != nil || tm.UnixMilli() < 0 {
			return p, "due", errors.New("must be an RFC 3339 time, e.g. 2026-11-30T12:00:00Z")
		}
		p.due = tm.UnixMilli()
	}
	return p, "", nil
}

// merge turns a valid item into its funnel write, merging with the stored row and target: what
// the item leaves out keeps its stored value, so a re-import never resets a due time or erases
// a cadence.
func (t *Targets) merge(p *parsedItem, now int64) (store.Write, error) {
	row, err := t.Store.GetSchedule(p.key)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Write{}, fmt.Errorf("reading the stored row: %v", err)
	}
	tgt, err := t.Store.GetTarget(p.key)
	if errors.Is(err, store.ErrNotFound) {
		tgt = store.Target{}
	} else if err != nil {
		return store.Write{}, fmt.Errorf("reading the stored target: %v", err)
	}
	tgt.URL, tgt.Device, tgt.Source = p.url, p.device, p.source
	lanes := store.Lanes{NeverRendered: true}
	carried, due := int64(0), p.due
	if exists {
		lanes, carried = row.Lanes, row.EffectiveIntervalMs
		if due < 0 {
			due = row.DueAtMs
		}
	}
	if due < 0 {
		due = now
	}
	if p.interval >= 0 {
		carried, tgt.StoredIntervalMs = p.interval, p.interval
	}
	sch, err := store.NewSchedule(p.key, due, p.source.Submitted(), carried, lanes)
	if err != nil {
		return store.Write{}, err
	}
	return store.Write{Schedule: sch, Target: &tgt}, nil
}
