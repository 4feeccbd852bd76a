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
	Writer Writer // every write of worker 0 goes through sweep.Changes' wrapper
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
func (t *Targets) post(w http.ResponseWriter, r *http.Request) {
	pol := t.Policy()
	cfg := pol.Config()
	devs := devices(cfg)
	body := http.MaxBytesReader(w, r.Body, maxTargetsBody)
	var resp TargetsResponse
	pending := make([]store.Write, 0, targetsChunk)
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := t.Writer.WriteSchedules(pending); err != nil {
			return err
		}
		resp.Accepted += len(pending)
		pending = pending[:0]
		return nil
	}
	reject := func(i int, field, msg string) {
		resp.Rejected++
		if len(resp.Errors) < maxReportErrors {
			resp.Errors = append(resp.Errors, ItemError{Index: i, Field: field, Error: msg})
		}
	}
	err := decodeItems(body, func(i int, item *TargetItem, decodeErr error) error {
		if decodeErr != nil {
			reject(i, "", decodeErr.Error())
			return nil
		}
		wr, field, err := t.build(item, devs, t.Now())
		if err != nil {
			reject(i, field, err.Error())
			return nil
		}
		pending = append(pending, wr)
		if len(pending) == targetsChunk {
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

var errBadJSON = errors.New("bad JSON")

// decodeItems streams the items of a JSON array or of NDJSON, calling fn for each. An item that
// is not a valid object is passed with its decode error; a body that is not JSON at all stops
// with errBadJSON.
func decodeItems(r io.Reader, fn func(i int, item *TargetItem, err error) error) error {
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

// build validates one item and turns it into its funnel write, merging with the stored target:
// what the item leaves out keeps its stored value, so a re-import never resets a due time or
// erases a cadence. It returns the offending field with an error.
func (t *Targets) build(it *TargetItem, devs map[string]bool, now int64) (store.Write, string, error) {
	u, err := NormalizeURL(it.URL)
	if err != nil {
		return store.Write{}, "url", err
	}
	device := it.Device
	if device == "" {
		device = "desktop"
	}
	if !devs[device] {
		return store.Write{}, "device", fmt.Errorf("unknown device %q", device)
	}
	key := []byte(device + "|" + u)
	if len(key) > store.MaxKeyLen {
		return store.Write{}, "url", fmt.Errorf("cache key of %d bytes is longer than the limit of %d", len(key), store.MaxKeyLen)
	}
	srcName := it.Source
	if srcName == "" {
		srcName = "api"
	}
	src, ok := sources[srcName]
	if !ok {
		return store.Write{}, "source", fmt.Errorf("must be sitemap, discovered or api, got %q", it.Source)
	}
	interval := int64(-1) // not given
	if len(it.Interval) > 0 && string(it.Interval) != "null" {
		if interval, err = parseInterval(it.Interval); err != nil {
			return store.Write{}, "interval", err
		}
		if interval < policy.MinCadence.Milliseconds() || interval > policy.MaxCadence.Milliseconds() {
			return store.Write{}, "interval", fmt.Errorf("must be between %s and %s", policy.MinCadence, policy.MaxCadence)
		}
	}
	due := int64(-1)
	if it.Due != "" {
		tm, err := time.Parse(time.RFC3339, it.Due)
		if err != nil || tm.UnixMilli() < 0 {
			return store.Write{}, "due", errors.New("must be an RFC 3339 time, e.g. 2026-11-30T12:00:00Z")
		}
		due = tm.UnixMilli()
	}

	row, err := t.Store.GetSchedule(key)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Write{}, "", fmt.Errorf("reading the stored row: %v", err)
	}
	tgt, err := t.Store.GetTarget(key)
	if errors.Is(err, store.ErrNotFound) {
		tgt = store.Target{}
	} else if err != nil {
		return store.Write{}, "", fmt.Errorf("reading the stored target: %v", err)
	}
	tgt.URL, tgt.Device, tgt.Source = u, device, src
	lanes := store.Lanes{NeverRendered: true}
	carried := int64(0)
	if exists {
		lanes, carried = row.Lanes, row.EffectiveIntervalMs
		if due < 0 {
			due = row.DueAtMs
		}
	}
	if due < 0 {
		due = now
	}
	if interval >= 0 {
		carried, tgt.StoredIntervalMs = interval, interval
	}
	sch, err := store.NewSchedule(key, due, src.Submitted(), carried, lanes)
	if err != nil {
		return store.Write{}, "url", err
	}
	return store.Write{Schedule: sch, Target: &tgt}, "", nil
}
