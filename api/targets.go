package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Public API limits.
const (
	// MaxTargetsBody bounds one POST /v1/targets request; a larger upload is answered 413 with
	// what landed before the limit, and is split by the client (freshqctl import does).
	MaxTargetsBody = 64 << 20
	// MaxTargetItem bounds one item of it, whitespace included. An item is decoded from a
	// buffer of at most this many bytes: a longer one is read to its end without being kept
	// and rejected by index, so a request never holds more than one bounded item.
	MaxTargetItem = 16 << 10
	// targetsHeld is what one upload holds in memory however long it is (a chunk of parsed
	// items with their keys, one item, the reader's buffer): its weight for the Limiter.
	targetsHeld     = 5 << 20
	maxItemDepth    = 32   // nesting inside one item
	targetsChunk    = 1000 // items per funnel batch
	maxReportErrors = 20   // errors listed in a response, by index
)

// TargetItem is one item of POST /v1/targets.
type TargetItem struct {
	URL      string          `json:"url"`
	Device   string          `json:"device,omitempty"`   // default "desktop"
	Interval json.RawMessage `json:"interval,omitempty"` // "6h", "7d", or seconds; default: keep, or resolve from routes
	Source   string          `json:"source,omitempty"`   // sitemap | discovered | api; default: keep, or api for a new target
	Due      string          `json:"due,omitempty"`      // RFC 3339; default: keep, or now for a new target
}

// ItemError names the field of one rejected item.
type ItemError struct {
	Index int    `json:"index"`
	Field string `json:"field"`
	Error string `json:"error"`
}

// TargetsResponse answers POST /v1/targets. It reports exactly what landed, whatever the
// status: Accepted items are committed, Rejected ones changed nothing, and when the body could
// not be read to its end (Error set: malformed JSON, over MaxTargetsBody) every item before
// StoppedAt was handled and none from it on. On a store failure (503) StoppedAt is the first
// item of the chunk the store failed: every valid item before it landed (Accepted, Merged),
// none from it on did; the items of that chunk found invalid before the write are counted in
// Rejected, the rest in neither, and nothing after the chunk was read.
type TargetsResponse struct {
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
	// Merged counts the accepted items whose key an earlier item of the same request also
	// named: each was merged over the one before it, in order (what it omits keeps the earlier
	// item's value), and they landed as one write.
	Merged    int         `json:"merged,omitempty"`
	Errors    []ItemError `json:"errors,omitempty"` // the first few, by item index
	Error     string      `json:"error,omitempty"`
	StoppedAt *int        `json:"stopped_at,omitempty"`
}

// Targets serves /v1/targets.
type Targets struct {
	Store  *store.Store
	Writer Writer    // every write of worker 0 goes through sweep.Changes' wrapper
	Locks  *KeyLocks // shared with the Applier
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
	body := http.MaxBytesReader(w, r.Body, MaxTargetsBody)
	var resp TargetsResponse
	reject := func(i int, field, msg string) {
		resp.Rejected++
		if len(resp.Errors) < maxReportErrors {
			resp.Errors = append(resp.Errors, ItemError{Index: i, Field: field, Error: msg})
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
	err := DecodeTargetItems(body, func(i int, item *TargetItem, decodeErr error) error {
		next = i + 1
		if decodeErr != nil {
			reject(i, fieldOf(decodeErr), decodeErr.Error())
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
	var bad *BodyError
	code := http.StatusBadRequest
	switch {
	case errors.As(err, &tooBig):
		code = http.StatusRequestEntityTooLarge
		resp.Error = fmt.Sprintf("body over %d bytes; split the upload", MaxTargetsBody)
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
var errBadJSON = errors.New("bad JSON")

// BodyError is a body that stops being readable JSON at item Index: the items before it were
// handled, none from it on.
type BodyError struct {
	Index int
	Msg   string
}

func (e *BodyError) Error() string { return fmt.Sprintf("bad JSON at item %d: %s", e.Index, e.Msg) }
func (e *BodyError) Unwrap() error { return errBadJSON }

// FieldError is an item that is JSON but not a valid target object, naming the field that made
// it so ("" when the item is not an object at all).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldOf(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// DecodeTargetItems streams the items of a JSON array, or of whitespace-separated JSON values
// (NDJSON, or one object however it is laid out), calling fn for each. Each item is held in a
// buffer of at most MaxTargetItem bytes: a longer one, or one that is JSON but not a target
// object, is passed to fn with its error (a *FieldError when a field can be named). A body
// whose structure breaks (between items, or a bracket that does not match) stops with a
// *BodyError naming the index of the item it could not read; so does anything after an
// array's closing bracket. Errors of r (such as *http.MaxBytesError) are returned as they are.
func DecodeTargetItems(r io.Reader, fn func(i int, item *TargetItem, err error) error) error {
	sc := &itemScanner{br: bufio.NewReaderSize(r, 64<<10)}
	first, err := sc.skipSpace()
	if err == io.EOF {
		return &BodyError{Index: 0, Msg: "empty body"}
	}
	if err != nil {
		return err
	}
	item := func(i int) error {
		raw, long, err := sc.value()
		if err != nil {
			return sc.fail(i, err)
		}
		if long {
			return fn(i, nil, fmt.Errorf("item over %d bytes", MaxTargetItem))
		}
		it, err := decodeItem(raw)
		return fn(i, it, err)
	}
	if first != '[' {
		for i := 0; ; i++ {
			if _, err := sc.skipSpace(); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := item(i); err != nil {
				return err
			}
		}
	}
	sc.br.ReadByte()
	if c, err := sc.skipSpace(); err != nil {
		return sc.fail(0, err)
	} else if c == ']' {
		sc.br.ReadByte()
		return sc.end(0)
	}
	for i := 0; ; i++ {
		if err := item(i); err != nil {
			return err
		}
		c, err := sc.skipSpace()
		if err != nil {
			return sc.fail(i+1, err)
		}
		sc.br.ReadByte()
		switch c {
		case ']':
			return sc.end(i + 1)
		case ',':
			if _, err := sc.skipSpace(); err != nil {
				return sc.fail(i+1, err)
			}
		default:
			return &BodyError{Index: i + 1, Msg: fmt.Sprintf("expected , or ] after item %d, found %q", i, c)}
		}
	}
}

// itemScanner splits a body into JSON values without decoding them: it tracks strings and
// brackets only, keeps at most MaxTargetItem bytes of a value, and leaves the grammar inside
// one item to encoding/json.
type itemScanner struct {
	br  *bufio.Reader
	buf []byte
}

var errTruncated = errors.New("truncated: the body ends inside an item")

// fail turns a scan error at item i into a BodyError, leaving the reader's own errors as they
// are.
func (sc *itemScanner) fail(i int, err error) error {
	var bad *BodyError
	switch {
	case err == io.EOF || errors.Is(err, errTruncated):
		return &BodyError{Index: i, Msg: errTruncated.Error()}
	case errors.As(err, &bad):
		bad.Index = i
		return bad
	}
	return err
}

// end checks that only whitespace follows an array's closing bracket; items is the count read.
func (sc *itemScanner) end(items int) error {
	c, err := sc.skipSpace()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return &BodyError{Index: items, Msg: fmt.Sprintf("%q after the closing ]", c)}
}

// skipSpace consumes whitespace and peeks at the next byte.
func (sc *itemScanner) skipSpace() (byte, error) {
	for {
		b, err := sc.br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, sc.br.UnreadByte()
		}
	}
}

func (sc *itemScanner) keep(b byte, long *bool) {
	if len(sc.buf) < MaxTargetItem {
		sc.buf = append(sc.buf, b)
	} else {
		*long = true
	}
}

func scalarByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.'
}

// value reads one JSON value: an object, an array, a string, or a scalar (number, true, false,
// null, or any run of letters, which encoding/json will refuse as an item).
func (sc *itemScanner) value() (raw []byte, long bool, err error) {
	sc.buf = sc.buf[:0]
	b, err := sc.br.ReadByte()
	if err != nil {
		return nil, false, err
	}
	if scalarByte(b) {
		for scalarByte(b) {
			sc.keep(b, &long)
			if b, err = sc.br.ReadByte(); err == io.EOF {
				return sc.buf, long, nil
			} else if err != nil {
				return nil, false, err
			}
		}
		return sc.buf, long, sc.br.UnreadByte()
	}
	var stack [maxItemDepth]byte
	depth, inStr, esc := 0, false, false
	for {
		sc.keep(b, &long)
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case b == '\\':
				esc = true
			case b == '"':
				inStr = false
			}
		case b == '"':
			inStr = true
		case b == '{' || b == '[':
			if depth == maxItemDepth {
				return nil, false, &BodyError{Msg: fmt.Sprintf("nested deeper than %d levels", maxItemDepth)}
			}
			stack[depth] = b + 2 // '{'+2 == '}', '['+2 == ']'
			depth++
		case b == '}' || b == ']':
			if depth == 0 || stack[depth-1] != b {
				return nil, false, &BodyError{Msg: fmt.Sprintf("unexpected %q", b)}
			}
			depth--
		case depth == 0:
			return nil, false, &BodyError{Msg: fmt.Sprintf("unexpected %q", b)}
		}
		if depth == 0 && !inStr {
			return sc.buf, long, nil
		}
		if b, err = sc.br.ReadByte(); err != nil {
			if err == io.EOF {
				err = errTruncated
			}
			return nil, false, err
		}
	}
}

// decodeItem decodes one bounded item, naming the field that makes it invalid.
func decodeItem(raw []byte) (*TargetItem, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var it TargetItem
	if err := dec.Decode(&it); err != nil {
		field := jsonErrorField(err)
		if field == "" {
			return nil, &FieldError{Err: fmt.Errorf("not a target object: %v", err)}
		}
		return nil, &FieldError{Field: field, Err: fmt.Errorf("not a target object: %v", err)}
	}
	if dec.More() {
		return nil, &FieldError{Err: errors.New("not a target object: more than one value")}
	}
	return &it, nil
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
func parseItem(it *TargetItem, devs map[string]bool) (parsedItem, string, error) {
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
