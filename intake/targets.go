package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/render"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/wire"
)

// ChunkItems is how many items one funnel batch of an upsert, a rush or a wait holds.
const ChunkItems = 1000

// Deleter is the store's delete.
type Deleter interface {
	DeleteTarget(cacheKey []byte) error
}

// Targets changes the stored targets for the operator: upserts (POST /v1/targets, a sitemap
// run's chunks), discovery, rush and wait, and delete. Each is a read-decide-write under the
// locks of its keys (KeyLocks, shared with the Applier) from its first read to its commit,
// written through the writer worker 0 passes (sweep.Changes' wrapper). Worker 0 builds one,
// with NewTargets, and every entry point that writes targets shares it.
type Targets struct {
	store store.Store
	w     Writer
	del   Deleter
	locks *KeyLocks
	seg   *shm.Segment
	set   func() *Settings
	clock func() int64
	// tuning is the Applier's (TargetsDeps.Tuning), for the explanation's threshold.
	tuning *freshness.TuningCell
}

// TargetsDeps are what Targets needs. Every one is required, because each carries a
// guarantee that would silently go if it were left out:
//   - Writer and Deleter: every write and delete passes the sweep's wrapper, so that a sweep
//     never publishes a row written after its snapshot;
//   - Locks: the key locks shared with the Applier, so that no result lands between a
//     decision and its commit;
//   - Seg: the lease table whose leases an operator's rush, a wait or a delete revokes, so
//     that an operator's action wins over a render in flight.
type TargetsDeps struct {
	Store    store.Store // reads
	Writer   Writer
	Deleter  Deleter
	Locks    *KeyLocks
	Seg      *shm.Segment
	Settings func() *Settings // the settings in force, with their policy
	Now      func() int64
	// Tuning is the Applier's (ApplierDeps.Tuning), so that GET /v1/targets explains a
	// freshness due time with the threshold and ceiling it was filed with; nil explains with
	// the configuration's.
	Tuning *freshness.TuningCell
}

// ErrMissingDependency is returned by a constructor left without one of its required
// dependencies.
var ErrMissingDependency = errors.New("intake: a required dependency is missing")

// NewTargets returns the targets service over d, or ErrMissingDependency naming the first of
// d's fields left nil.
func NewTargets(d TargetsDeps) (*Targets, error) {
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Store", d.Store == nil}, {"Writer", d.Writer == nil}, {"Deleter", d.Deleter == nil}, {"Locks", d.Locks == nil},
		{"Seg", d.Seg == nil}, {"Settings", d.Settings == nil}, {"Now", d.Now == nil},
	} {
		if dep.nil {
			return nil, fmt.Errorf("%w: Targets needs %s", ErrMissingDependency, dep.name)
		}
	}
	return &Targets{store: d.Store, w: d.Writer, del: d.Deleter, locks: d.Locks, seg: d.Seg, set: d.Settings, clock: d.Now, tuning: d.Tuning}, nil
}

// Settings are the settings in force, with their policy.
func (t *Targets) Settings() *Settings { return t.set() }

// Policy is the policy in force.
func (t *Targets) Policy() *policy.Policy { return t.set().Policy }

// Now is the time, in Unix milliseconds, of the clock t was given.
func (t *Targets) Now() int64 { return t.clock() }

func (t *Targets) writer() Writer { return t.w }

func (t *Targets) lock(keys [][]byte) func() { return t.locks.Lock(keys) }

// Keying is how a URL and a device taken from outside become a cache key under one
// configuration: the devices a key may name and the key rules (cachekey.Rules). Every entry
// point that takes a URL (targets, uploads, sitemap entries, discover, prioritize, delete,
// explain, pages) builds its keys through one, taken from the policy in force (KeyingOf), so
// that a reload changes them all at once. Remote results are not among them: they carry the
// key their lease granted, byte for byte, which must match the lease.
type Keying struct {
	Devices map[string]bool
	Rules   *cachekey.Rules // nil: the zero rules (cachekey.NormalizeURL)
}

// KeyingOf is the keying of set: its devices and its policy's key rules.
func KeyingOf(set *Settings) Keying {
	return Keying{Devices: set.Devices, Rules: set.Policy.Keys()}
}

// Key is the cache key of url on device ("" is desktop), or a *FieldError naming "url" or
// "device". A key longer than store.MaxKeyLen is refused here, naming "url", as ParseItem
// refuses it: the store could never hold it, so a request naming it is a bad request, never a
// store failure to retry.
func Key(url, device string, k Keying) ([]byte, error) {
	u, err := k.Rules.Normalize(url)
	if err != nil {
		return nil, fieldErr("url", err)
	}
	if device == "" {
		device = cachekey.DefaultDevice
	}
	if !k.Devices[device] {
		return nil, fieldErr("device", errors.New("unknown device "+device))
	}
	key := cachekey.New(device, u)
	if len(key) > store.MaxKeyLen {
		return nil, fieldErr("url", fmt.Errorf("cache key of %d bytes is longer than the limit of %d", len(key), store.MaxKeyLen))
	}
	return key, nil
}

// Reject is told of an item that did not land, by its index, with its field ("" for none)
// and why.
type Reject func(i int, field, msg string)

// Upsert merges a chunk of valid items with the stored rows and targets and writes them in one
// funnel call, holding the chunk's key locks from the first read to the commit. An item whose
// merge fails is rejected, the others land. It returns the number of items that landed (an
// item merged into another counts: it landed in that write), or a *StoreError when the commit
// failed, and then nothing of the chunk landed.
func (t *Targets) Upsert(chunk []Item, reject Reject) (int, error) {
	keys := make([][]byte, len(chunk))
	for i := range chunk {
		keys[i] = chunk[i].Key
	}
	defer t.lock(keys)()
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
	if err := t.writer().WriteSchedules(writes); err != nil {
		return 0, &StoreError{err}
	}
	return items, nil
}

// Landed is what became of one item of a chunk a sitemap run upserted: Failed says why it did
// not land; otherwise Existed says whether it updated a stored target or added one.
type Landed struct {
	Existed bool
	Failed  string
}

// UpsertChunk upserts a sitemap run's chunk through gate, and says what became of each item.
// Whether a key existed is read just before: a concurrent POST /v1/targets of the same URL may
// make an "added" really an "updated", never lose either. It fails with ErrClosed once the
// gate is shut or ctx is done, and with a *StoreError when the commit failed.
func (t *Targets) UpsertChunk(ctx context.Context, gate *Gate, chunk []Item) ([]Landed, error) {
	out := make([]Landed, len(chunk))
	for i := range chunk {
		chunk[i].Index = i
		_, err := t.store.GetSchedule(chunk[i].Key)
		out[i].Existed = err == nil
	}
	leave, err := gate.Enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	if _, err := t.Upsert(chunk, func(i int, _, msg string) { out[i].Failed = msg }); err != nil {
		return nil, err
	}
	return out, nil
}

// Gate lets a service's writes through until Shut, after which none starts again. Enter never
// waits: a writer that meets Shut there stops instead of blocking Shut's wait for it.
type Gate struct{ mu sync.RWMutex }

// Enter admits one write, or fails with ErrClosed when the gate is shut or ctx is done. The
// write holds the gate until it calls leave.
func (g *Gate) Enter(ctx context.Context) (leave func(), err error) {
	if !g.mu.TryRLock() { // only Shut takes the write side
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		g.mu.RUnlock()
		return nil, fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return g.mu.RUnlock, nil
}

// Shut waits for the writes in flight to finish and admits none from then on, for good.
func (g *Gate) Shut() { g.mu.Lock() }

// Discover files an unknown page a crawler hit as a discovered target, due now, and returns
// its key and whether it was created: a known target is left as it is (its source is never
// downgraded to discovered).
func (t *Targets) Discover(url, device string) (key []byte, created bool, err error) {
	p, err := ParseItem(&wire.TargetItem{URL: url, Device: device, Source: "discovered"}, KeyingOf(t.Settings()))
	if err != nil {
		return nil, false, err
	}
	if _, err := t.store.GetSchedule(p.Key); err == nil {
		return p.Key, false, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, &StoreError{err}
	}
	var rejected error
	n, err := t.Upsert([]Item{p}, func(_ int, _, msg string) { rejected = errors.New(msg) })
	if err == nil && n != 1 {
		err = &StoreError{rejected}
	}
	if err != nil {
		return nil, false, fmt.Errorf("not created: %w", err)
	}
	return p.Key, true, nil
}

// CheckRenderable returns nil when url on device may be filed to be rendered: its cache key is
// one the store can hold and, when render.domains is set, its host is one the list names (a
// target of another host would only ever render as blocked). Otherwise a *FieldError naming
// "url", matching ErrHostNotAllowed for a host the list leaves out. It writes nothing, so a
// caller that files several URLs all or nothing checks them all first.
func (t *Targets) CheckRenderable(url, device string) error {
	set := t.Settings()
	key, err := Key(url, device, KeyingOf(set))
	if err != nil {
		return err
	}
	if host := string(cachekey.Host(key)); len(set.Domains) > 0 && !render.Allowed(set.Domains, host) {
		return fieldErr("url", &kindError{kind: ErrHostNotAllowed,
			msg: host + " is not a host render.domains names: its pages are never rendered"})
	}
	return nil
}

// Prioritize rushes or waits the targets req names (a url, or every target under a prefix),
// of req's device or, when it names none, of every device, and returns how many it changed. rush: the rows render at the urgent lane, due now if they
// were due later; the due time stays the freshness deadline and the urgent mark clears with
// the next render. wait: the cached page is dropped and the cadence refills it, the schedule
// unchanged. A request naming nothing stored fails with ErrNotFound.
func (t *Targets) Prioritize(req wire.PrioritizeRequest) (int, error) {
	if req.Mode != "rush" && req.Mode != "wait" {
		return 0, fieldErr("mode", errors.New("must be rush or wait"))
	}
	if (req.URL == "") == (req.Prefix == "") {
		return 0, fieldErr("url", errors.New("give exactly one of url and prefix"))
	}
	field, name := "url", req.URL
	if req.Prefix != "" {
		field, name = "prefix", req.Prefix
	}
	set := t.Settings()
	devices := []string{req.Device}
	if req.Device == "" {
		// No device named: the page as every device renders it, since each device's crawler is
		// served its own copy.
		devices = slices.Sorted(maps.Keys(set.Devices))
	} else if !set.Devices[req.Device] { // checked before the url, as the answer has always named it first
		return 0, fieldErr("device", errors.New("unknown device "+req.Device))
	}
	// A url is a page: it goes through the key rules. A prefix is a string prefix of stored
	// keys, which dropping parameters or a trailing slash would widen or break: it only gets
	// the zero rules (case, default port).
	keying := KeyingOf(set)
	if req.Prefix != "" {
		keying.Rules = nil
	}
	var keys [][]byte
	for _, device := range devices {
		key, err := Key(name, device, keying)
		if err != nil {
			if fe := (*FieldError)(nil); errors.As(err, &fe) && fe.Field == "url" {
				fe.Field = field
			}
			return 0, err
		}
		if req.Prefix == "" {
			keys = append(keys, key)
			continue
		}
		if err := t.store.ForEachSchedule(key, func(k []byte, _ store.Row) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		}); err != nil {
			return 0, &StoreError{err}
		}
	}
	if req.Mode == "rush" && len(keys) > 0 {
		t.seg.BumpCacheEpoch() // before the rows are due: their renders fetch the site's scripts anew
	}
	matched := 0
	for start := 0; start < len(keys); start += ChunkItems {
		n, err := t.prioritize(keys[start:min(start+ChunkItems, len(keys))], req.Mode, revokeInFlight)
		matched += n
		if err != nil {
			return matched, fmt.Errorf("%w (%d targets done before it)", &StoreError{err}, matched)
		}
	}
	if matched == 0 {
		return 0, fieldErr(field, ErrNotFound)
	}
	return matched, nil
}

// DueForLastmod makes due now each existing target of items whose sitemap <lastmod> (ms, 0:
// none) is later than its last render: the site says the page changed since freshq rendered
// it, so its cadence is not waited out. Not a rush (no urgent lane: a sitemap may list
// thousands), and a render in flight is left to land. landed is UpsertChunk's answer for items.
func (t *Targets) DueForLastmod(items []Item, lastmod []int64, landed []Landed) error {
	var keys [][]byte
	for i := range items {
		if i >= len(landed) || i >= len(lastmod) || lastmod[i] == 0 || !landed[i].Existed || landed[i].Failed != "" {
			continue
		}
		tgt, err := t.store.GetTarget(items[i].Key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return &StoreError{err}
		}
		if tgt.LastRender.AtMs != 0 && tgt.LastRender.AtMs < lastmod[i] && lastmod[i] <= t.Now() {
			keys = append(keys, items[i].Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := t.prioritize(keys, "due", keepInFlight); err != nil {
		return &StoreError{err}
	}
	return nil
}

// inFlight says what a rush or wait does to a render of the key already in flight.
type inFlight bool

const (
	// revokeInFlight: an operator's rush or wait wins over the render in flight, whose result
	// is fenced.
	revokeInFlight inFlight = true
	// keepInFlight: a rush a reader asked for (a page missing or stale) leaves a render in
	// flight alone, since that render brings the page the reader wants: revoking it would
	// render the page twice. A render claimed between the caller's look at the lease and this
	// write is kept too, and its result is applied as usual.
	keepInFlight inFlight = false
)

// prioritize rushes or waits a chunk of keys under their locks. After the commit, still under
// the locks, it revokes the lease of every key whose render is in flight: that render was
// granted before the rush or wait and would undo it (clear the urgent mark, file the next due
// time from now, store the page a wait dropped), so its result is fenced. The key is held for
// queue.release_grace, as after any render, and is then granted again, rushed. A key with no
// lease gets no hold: whatever is granted from now on renders the row as the rush left it.
// With keepInFlight nothing is revoked.
func (t *Targets) prioritize(keys [][]byte, mode string, inflight inFlight) (int, error) {
	defer t.lock(keys)()
	now := t.Now()
	writes := make([]store.Write, 0, len(keys))
	for _, k := range keys {
		row, err := t.store.GetSchedule(k)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since the prefix scan
		}
		if err != nil {
			return 0, err
		}
		due, lanes := storedDue(row.DueAtMs, now), row.Lanes
		switch mode {
		case "rush":
			due, lanes.Urgent = min(due, now), true
		case "due": // due now, in its own lane (a sitemap's <lastmod>)
			due = min(due, now)
		}
		sch, err := store.NewSchedule(k, due, row.Submitted, row.EffectiveIntervalMs, lanes)
		if err == nil {
			sch, err = keepRank(sch, row)
		}
		if err != nil {
			return 0, err
		}
		w := store.Write{Schedule: sch, DropPage: mode == "wait"}
		if mode == "wait" {
			// No good page is stored any more: the next render refills it whatever its
			// verdict (verdicts.go), as a page never rendered well would be.
			tg, err := t.store.GetTarget(k)
			switch {
			case err == nil && !tg.Verdict.Marked:
				tg.Verdict.Marked = true
				w.Target = &tg
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return 0, err
			}
		}
		writes = append(writes, w)
	}
	if len(writes) == 0 {
		return 0, nil
	}
	if err := t.writer().WriteSchedules(writes); err != nil {
		return 0, err
	}
	if inflight == revokeInFlight {
		set := t.Settings()
		leases, hold := t.seg.Leases(), set.ReleaseGrace.Milliseconds()
		for _, w := range writes {
			if li, ok := leases.Lookup(shm.KeyHash(w.Schedule.Key()), now); ok && !li.Released {
				revokeLease(t.seg, &set.Hosts, w.Schedule.Key(), now, hold)
			}
		}
	}
	return len(writes), nil
}

// Delete removes the target of key, its schedule row, its index entry and its page, or fails
// with ErrNotFound (in a *FieldError naming "url"). A delete is never undone by a render that
// was in flight:
//   - it holds the key's lock, like every writer of worker 0, so no result of the key is
//     between its decision and its commit, and a result applied later finds no row (the
//     Applier never re-creates one);
//   - it deletes through Deleter (sweep.Changes' wrapper in worker 0), so a sweep in progress
//     does not publish the key;
//   - it revokes the key's lease, so the in-flight render's result is fenced, and holds the
//     key for two sweep intervals, so the entry of the ready set published before the delete
//     is not granted: within one interval (and the sweep's own run, bounded by it in
//     practice) the next sweep replaces that set with one that cannot hold the key. A sweep
//     that fails leaves the old set longer; a render granted from it then finds no row, and its
//     result is skipped.
func (t *Targets) Delete(key []byte) error {
	defer t.lock([][]byte{key})()
	if _, err := t.store.GetSchedule(key); errors.Is(err, store.ErrNotFound) {
		return fieldErr("url", ErrNotFound)
	}
	return t.deleteLocked(key)
}

// deleteLocked deletes key's records and revokes its lease; the caller holds key's lock.
func (t *Targets) deleteLocked(key []byte) error {
	if err := t.del.DeleteTarget(key); err != nil {
		return &StoreError{err}
	}
	set := t.Settings()
	hold := 2 * set.SweepInterval.Milliseconds()
	revokeLease(t.seg, &set.Hosts, key, t.Now(), hold)
	return nil
}

// revokeLease ends key's lease in flight and holds the key for hold ms (shm.Leases.Revoke).
// When a remote renderer held the lease, the host slot worker 0 holds for it is given back
// too: the remote's result will be fenced and its release answered "no longer held", so
// nothing else would give it back before the slot's own lease lapsed (up to queue.lease_ttl),
// and a host limited to 1 would render nothing meanwhile. The caller holds key's lock.
func revokeLease(seg *shm.Segment, hosts *hosts.Limits, key []byte, now, hold int64) {
	leases, h := seg.Leases(), shm.KeyHash(key)
	li, live := leases.Lookup(h, now)
	if ended, _ := leases.Revoke(h, now, hold); ended && live && !li.Released {
		ReleaseRemoteHostSlot(seg, hosts, key, li.Holder, now)
	}
}

// parseInterval reads an interval given as a duration string or a number of seconds.
func parseInterval(raw json.RawMessage) (int64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		d, err := wire.ParseDuration(s)
		if err != nil {
			return 0, errors.New("unparsable duration (use e.g. 6h, 7d, 90m)")
		}
		return d.Milliseconds(), nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return 0, errors.New("must be a duration string or a number of seconds")
	}
	return int64(secs * 1000), nil
}

var sources = map[string]store.Source{"sitemap": store.SourceSitemap, "discovered": store.SourceDiscovered, "api": store.SourceAPI}

// ValidateTargetItem checks one item under k (its devices and key rules) and returns its cache
// key, or the field it got wrong with an error.
func ValidateTargetItem(it *wire.TargetItem, k Keying) (key []byte, field string, err error) {
	p, err := ParseItem(it, k)
	if fe := (*FieldError)(nil); errors.As(err, &fe) {
		return p.Key, fe.Field, fe.Err
	}
	return p.Key, "", err
}

// Item is a validated target item, not yet merged with what is stored.
type Item struct {
	Index     int    // in its request, or in its chunk
	Key       []byte // cache key
	URL       string // normalised
	merged    []int  // indices of later items of the same key merged over this one, in order
	device    string
	source    store.Source
	sourceSet bool
	interval  int64 // -1: not given
	due       int64 // -1: not given
}

// MergeOver folds a later item of the same key into p: what the later item gives wins, what
// it omits keeps p's value, exactly as if the two had been posted one after the other.
func (p *Item) MergeOver(later *Item) {
	p.merged = append(p.merged, later.Index)
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

// Device is the item's device (the default device when it named none).
func (p *Item) Device() string { return p.device }

// indices are the request indices of the items p stands for.
func (p *Item) indices() []int { return append([]int{p.Index}, p.merged...) }

// ParseItem validates one item without reading the store, or returns a *FieldError naming the
// field it got wrong.
func ParseItem(it *wire.TargetItem, k Keying) (Item, error) {
	p := Item{interval: -1, due: -1, source: store.SourceAPI}
	u, err := k.Rules.Normalize(it.URL)
	if err != nil {
		return p, fieldErr("url", err)
	}
	p.URL, p.device = u, it.Device
	if p.device == "" {
		p.device = cachekey.DefaultDevice
	}
	if !k.Devices[p.device] {
		return p, fieldErr("device", fmt.Errorf("unknown device %q", p.device))
	}
	p.Key = cachekey.New(p.device, u)
	if len(p.Key) > store.MaxKeyLen {
		return p, fieldErr("url", fmt.Errorf("cache key of %d bytes is longer than the limit of %d", len(p.Key), store.MaxKeyLen))
	}
	if it.Source != "" {
		src, ok := sources[it.Source]
		if !ok {
			return p, fieldErr("source", fmt.Errorf("must be sitemap, discovered or api, got %q", it.Source))
		}
		p.source, p.sourceSet = src, true
	}
	if len(it.Interval) > 0 && string(it.Interval) != "null" {
		if p.interval, err = parseInterval(it.Interval); err != nil {
			return p, fieldErr("interval", err)
		}
		if p.interval < policy.MinCadence.Milliseconds() || p.interval > policy.MaxCadence.Milliseconds() {
			return p, fieldErr("interval", fmt.Errorf("must be between %s and %s", policy.MinCadence, policy.MaxCadence))
		}
	}
	if it.Due != "" {
		tm, err := time.Parse(time.RFC3339, it.Due)
		if err != nil {
			return p, fieldErr("due", errors.New("must be an RFC 3339 time, e.g. 2026-11-30T12:00:00Z"))
		}
		if ms := tm.UnixMilli(); ms < store.MinDueMs || ms > store.MaxDueMs {
			return p, fieldErr("due", fmt.Errorf("must be between %s and %s",
				time.UnixMilli(store.MinDueMs).UTC().Format(time.RFC3339), time.UnixMilli(store.MaxDueMs).UTC().Format(time.RFC3339)))
		}
		p.due = tm.UnixMilli()
	}
	return p, nil
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
func (t *Targets) merge(p *Item, now int64) (store.Write, error) {
	row, err := t.store.GetSchedule(p.Key)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Write{}, fmt.Errorf("reading the stored row: %v", err)
	}
	tgt, err := t.store.GetTarget(p.Key)
	hasTarget := err == nil
	if errors.Is(err, store.ErrNotFound) {
		tgt = store.Target{}
	} else if err != nil {
		return store.Write{}, fmt.Errorf("reading the stored target: %v", err)
	}
	tgt.URL, tgt.Device = p.URL, p.device
	if p.sourceSet || !hasTarget {
		tgt.Source = p.source
	}
	submitted := tgt.Source.Submitted()
	if exists && !p.sourceSet {
		submitted = row.Submitted
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
	sch, err := store.NewSchedule(p.Key, due, submitted, carried, lanes)
	if err == nil && exists {
		sch, err = keepRank(sch, row)
	}
	if err != nil {
		return store.Write{}, err
	}
	return store.Write{Schedule: sch, Target: &tgt}, nil
}
