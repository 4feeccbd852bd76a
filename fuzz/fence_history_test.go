package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/testkit/intaketest"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// The fence history test runs worker 0's writers (results, DELETE /v1/targets, POST
// /v1/prioritize, POST /v1/targets, the sweep) and render workers' lease grants at once, from
// several goroutines over a few keys, on a manual clock. Each operation records when it started
// and ended on one global sequence, and what it was answered; a checker then proves the fencing
// promises of package api over the history, whatever the interleaving was:
//
//	P1 a grant's result is accepted (applied or skipped: both pass the lease check and release
//	   the grant) at most once, across batches and within one; a lease never granted, never;
//	P2 a result is accepted only if its grant was held when it arrived: not when the clock at its
//	   start was already past the grant's expiry, nor after a DELETE answered 200, or a rush or
//	   wait answered 200, that began after the grant and ended before the result began;
//	P3 a DELETE answered 200 is not undone: the key's row, target or page is seen after the
//	   delete ended only if an upsert of the key ended after the delete began;
//	P4 a rush answered 200 is not undone: its row is seen without its urgent mark only after a
//	   delete (200), or an accepted result of a grant that did not end before the rush began;
//	P5 a wait answered 200 is not undone: a page is seen after it only after an accepted result
//	   of a grant that did not end before the wait began;
//
// and at the end the due index agrees with the rows (store.VerifyIndex) and no row is below the
// floor (F1). "Seen" is by a probe (reads of the row, target and page), by another operation's
// answer (a delete, rush or wait answered 200 saw the row; a lone accepted result applied, not
// skipped, saw it), and by the state at the end.

const (
	fenceKeys    = 8
	fenceTTL     = 30_000 // ms, each grant's lease
	fenceStartMs = 1_800_000_000_000
	// a release grace of 1s and a delete's hold of two sweep intervals (4s): short, so that a
	// key is granted again soon
	fenceHistoryYAML = "routes:\n  - {name: catalog, match: prefix, path: /c/, interval: 24h}\nqueue: {release_grace: 1s, ready: {sweep_interval: 2s}}\n"
)

// fenceNode is worker 0 as cmd/worker wires it: one KeyLocks and one sweep.Changes shared by
// every writer, the real handlers on one mux, and a sweeper.
type fenceNode struct {
	e       *qtest.Env
	mux     *http.ServeMux
	sweeper *sweep.Sweeper
	sweepMu sync.Mutex // a Sweeper is used by one goroutine at a time
}

func newFenceNode(t testing.TB) *fenceNode {
	// The store keeps the class index, as worker 0's does: the sweeps read by class.
	e := qtest.NewClassified(t, fenceHistoryYAML, fenceStartMs, shm.Options{LeaseCapacity: 64, LeaseWindow: 8},
		func(p *policy.Policy) store.Classifier { return sweep.NewClassifier(p) })
	changes := sweep.NewChanges()
	writer := changes.Wrap(e.Store)
	locks := &intake.KeyLocks{}
	n := &fenceNode{e: e, mux: http.NewServeMux()}
	n.sweeper = qtest.Must(sweep.New(sweep.Options{Store: sweep.FromStore(e.Store, changes), Segment: e.Seg, Changes: changes,
		Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, settings.SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil)}))(t)
	(&api.Control{Applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Writer: writer, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, settings.IntakeSettings), Now: e.Now, Log: qtest.Log(nil)}),
		Status: func() wire.Status { return wire.Status{} }}).Register(n.mux)
	targets := &api.Targets{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: writer, Deleter: writer, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, settings.IntakeSettings), Now: e.Now})}
	targets.Register(n.mux)
	(&api.Operate{Targets: targets.Targets}).Register(n.mux)
	(&api.Explain{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: writer, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, settings.IntakeSettings), Now: e.Now})}).Register(n.mux)
	return n
}

type fenceKind uint8

const (
	fkClaim fenceKind = iota
	fkResult
	fkDelete
	fkUpsert
	fkRush
	fkWait
	fkProbe
	fkAdvance
	fkSweep
	numFenceKinds
)

var fenceKindNames = [...]string{"claim", "result", "delete", "upsert", "rush", "wait", "probe", "advance", "sweep"}

func (k fenceKind) String() string { return fenceKindNames[k] }

// fenceStep is one operation of a goroutine's program: a kind, a key, and an argument whose
// bits choose the variant (see fenceRun.result and fenceRun.upsert).
type fenceStep struct {
	kind fenceKind
	key  int
	arg  byte
}

// Bits of a result step's argument.
const (
	resLapse  = 1 << 0 // advance the clock to the grant's expiry first: the lease lapsed
	resTwice  = 1 << 1 // the batch carries the result twice
	resForge  = 1 << 2 // a lease never granted (the grant's version bit 22 flipped)
	resPair   = 1 << 3 // the batch carries a second grant's result too
	resKeep   = 1 << 4 // keep the grant in flight: the batch is delivered again later
	resOther  = 1 << 5 // deliver any grant of the run: a stale one, or another goroutine's
	resBinary = 1 << 6 // the binary batch, not JSON
	resRace   = 1 << 7 // deliver the batch twice at once: a retry racing the original delivery
)

type fenceGrant struct {
	key        int
	lease      wire.Lease
	expiresMs  int64 // the clock at the grant plus fenceTTL: lapsed from then on
	start, end int64
}

type fenceItem struct {
	grant  int // -1: forged
	key    int
	fenced bool
}

type fenceOp struct {
	kind       fenceKind
	g          int
	key        int
	start, end int64
	clock0     int64 // the clock just after start: every decision of the operation is at or after it
	code       int
	grant      int // claim: the grant, or -1
	items      []fenceItem
	applied    int
	skipped    int
	// probe: what was seen
	row, target, page, urgent bool
	note                      string
}

func (o *fenceOp) String() string {
	s := fmt.Sprintf("#%d-%d g%d %s k%d", o.start, o.end, o.g, o.kind, o.key)
	switch o.kind {
	case fkClaim:
		if o.grant >= 0 {
			s += fmt.Sprintf(" -> grant %d", o.grant)
		} else {
			s += " -> refused"
		}
	case fkResult:
		s += fmt.Sprintf(" clock %d -> %d applied %d skipped %d items %+v", o.clock0, o.code, o.applied, o.skipped, o.items)
	case fkProbe:
		s += fmt.Sprintf(" row %v urgent %v target %v page %v", o.row, o.urgent, o.target, o.page)
	default:
		s += fmt.Sprintf(" -> %d", o.code)
	}
	if o.note != "" {
		s += " " + o.note
	}
	return s
}

// fenceRun is one history over one node: fenceKeys keys of their own.
type fenceRun struct {
	n    *fenceNode
	urls []string
	keys [][]byte
	seq  atomic.Int64

	mu     sync.Mutex
	grants []fenceGrant
	ops    []fenceOp
	errs   []string
}

func newFenceRun(t testing.TB, n *fenceNode, host string) *fenceRun {
	r := &fenceRun{n: n}
	for i := range fenceKeys {
		u, err := cachekey.NormalizeURL(fmt.Sprintf("https://%s/c/%d", host, i))
		if err != nil {
			t.Fatal(err)
		}
		r.urls = append(r.urls, u)
		r.keys = append(r.keys, []byte("desktop|"+u))
	}
	return r
}

func (r *fenceRun) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

func (r *fenceRun) record(o fenceOp) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

// serve calls the real handler; it returns the code and the body.
func (r *fenceRun) serve(method, target, ctype string, body []byte) (int, []byte) {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	r.n.mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// play runs goroutine g's program. inflight holds the grants it holds and has not delivered.
func (r *fenceRun) play(g int, prog []fenceStep) {
	var inflight []int
	for _, s := range prog {
		switch s.kind {
		case fkClaim:
			inflight = r.claim(g, s, inflight)
		case fkResult:
			inflight = r.result(g, s, inflight)
		case fkDelete:
			r.keyOp(g, s, http.MethodDelete, "/v1/targets?url="+url.QueryEscape(r.urls[s.key]), nil, 200, 404)
		case fkUpsert:
			r.upsert(g, s)
		case fkRush, fkWait:
			body, _ := json.Marshal(map[string]string{"url": r.urls[s.key], "mode": s.kind.String()})
			r.keyOp(g, s, http.MethodPost, "/v1/prioritize", body, 200, 404)
		case fkProbe:
			r.probe(g, s.key)
		case fkAdvance:
			r.n.e.Advance(int64(s.arg) * 16) // up to 4s: graces and holds end, leases draw near
		case fkSweep:
			if r.n.sweepMu.TryLock() {
				if _, err := r.n.sweeper.Sweep(context.Background()); err != nil {
					r.fail("sweep: %v", err)
				}
				r.n.sweepMu.Unlock()
			}
		}
	}
}

func (r *fenceRun) claim(g int, s fenceStep, inflight []int) []int {
	o := fenceOp{kind: fkClaim, g: g, key: s.key, grant: -1}
	o.start = r.seq.Add(1)
	now := r.n.e.Now()
	l, st := r.n.e.Seg.Leases().Acquire(shm.KeyHash(r.keys[s.key]), now, fenceTTL, uint64(g+1))
	o.end = r.seq.Add(1)
	o.note = st.String()
	if st == shm.Acquired {
		r.mu.Lock()
		o.grant = len(r.grants)
		r.grants = append(r.grants, fenceGrant{key: s.key, lease: wire.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash},
			expiresMs: now + fenceTTL, start: o.start, end: o.end})
		r.mu.Unlock()
		inflight = append(inflight, o.grant)
		if len(inflight) > 4 { // a render worker that died with it: the lease lapses
			inflight = inflight[1:]
		}
	}
	r.record(o)
	return inflight
}

// result delivers a batch for one of g's grants in flight (the one of s.key if it holds one).
// When g holds none it claims s.key first, as a quick render would; with resOther it delivers
// any grant of the run instead.
func (r *fenceRun) result(g int, s fenceStep, inflight []int) []int {
	pick := func(avoid int) (int, bool) {
		if s.arg&resOther == 0 {
			for _, id := range inflight {
				if id != avoid && r.grant(id).key == s.key {
					return id, true
				}
			}
			for _, id := range inflight {
				if id != avoid {
					return id, true
				}
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.grants) == 0 {
			return 0, false
		}
		id := (int(s.arg)*31 + s.key + len(r.ops)) % len(r.grants)
		return id, id != avoid
	}
	if len(inflight) == 0 && s.arg&resOther == 0 {
		// nothing in flight: claim the key and deliver at once, as a quick render would
		if inflight = r.claim(g, s, inflight); len(inflight) == 0 {
			return inflight
		}
	}
	first, ok := pick(-1)
	if !ok {
		return inflight
	}
	ids := []int{first}
	if s.arg&resTwice != 0 {
		ids = append(ids, first)
	}
	if s.arg&resPair != 0 {
		if id, ok := pick(first); ok && r.grant(id).key != r.grant(first).key {
			ids = append(ids, id)
		}
	}
	o := fenceOp{kind: fkResult, g: g, key: r.grant(first).key}
	var rs []wire.Result
	for j, id := range ids {
		gr := r.grant(id)
		it := fenceItem{grant: id, key: gr.key}
		res := wire.Result{Key: r.keys[gr.key], Outcome: "ok", Status: 200, DurationMs: 120,
			Headers: map[string]string{"content-type": "text/html"}, Body: []byte(fmt.Sprintf("<html>grant %d</html>", id)), Lease: gr.lease}
		switch id % 6 { // half the renders fail
		case 3:
			res.Outcome, res.Status, res.Body = "not_found", 404, nil
		case 4:
			res.Outcome, res.Status, res.Body = "server_error", 503, nil
		case 5:
			res.Outcome, res.Status, res.Body = "timeout", 0, nil
		}
		if j == 0 && s.arg&resForge != 0 {
			res.Lease.State ^= 1 << 22 // a version this slot never reaches here: never granted
			it.grant = -1
		}
		o.items = append(o.items, it)
		rs = append(rs, res)
	}
	if s.arg&resLapse != 0 {
		if d := r.grant(first).expiresMs - r.n.e.Now(); d > 0 {
			r.n.e.Advance(d)
		}
	}
	var body []byte
	ctype := "application/json"
	if s.arg&resBinary != 0 {
		body, ctype = wire.EncodeResults(nil, rs), wire.ResultsContentType
	} else {
		body, _ = json.Marshal(map[string]any{"results": rs})
	}
	if s.arg&resRace != 0 {
		var wg sync.WaitGroup
		wg.Go(func() { r.deliver(o, ctype, body) })
		r.deliver(o, ctype, body)
		wg.Wait()
	} else {
		r.deliver(o, ctype, body)
	}
	if s.arg&resKeep == 0 {
		inflight = slices.DeleteFunc(inflight, func(id int) bool { return slices.Contains(ids, id) })
	}
	return inflight
}

// deliver posts a results batch, and records it with what was answered for each item.
func (r *fenceRun) deliver(o fenceOp, ctype string, body []byte) {
	o.items = slices.Clone(o.items)
	o.start = r.seq.Add(1)
	o.clock0 = r.n.e.Now()
	code, answer := r.serve(http.MethodPost, wire.PathResults, ctype, body)
	o.end = r.seq.Add(1)
	o.code = code
	var st wire.ApplyStats
	if code != 200 && code != 409 {
		r.fail("%s: answered %d %s", &o, code, answer)
	} else if err := json.Unmarshal(answer, &st); err != nil {
		r.fail("%s: answer %q: %v", &o, answer, err)
	} else {
		for _, fi := range st.FencedItems {
			if fi.Index >= 0 && fi.Index < len(o.items) {
				o.items[fi.Index].fenced = true
			}
		}
		accepted := 0
		for _, it := range o.items {
			if !it.fenced {
				accepted++
			}
		}
		o.applied, o.skipped = st.Applied, st.Skipped
		if st.Fenced != len(o.items)-accepted || st.Applied+st.Skipped != accepted || (code == 409) != (accepted == 0) {
			r.fail("%s: answer %d %s does not add up", &o, code, answer)
		}
	}
	r.record(o)
}

func (r *fenceRun) grant(id int) fenceGrant {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grants[id]
}

// upsert files the key, as POST /v1/targets does: the argument's bits choose the source (bits
// 0-1: omitted, sitemap, api, discovered), an interval (bit 2) and a due time (bit 3: from 8
// hours ago to 7 hours ahead, by bits 4-7; one in the past may lie below the floor a sweep
// advanced, and must lower it).
func (r *fenceRun) upsert(g int, s fenceStep) {
	item := map[string]string{"url": r.urls[s.key]}
	if src := []string{"", "sitemap", "api", "discovered"}[s.arg&3]; src != "" {
		item["source"] = src
	}
	if s.arg&4 != 0 {
		item["interval"] = "6h"
	}
	if s.arg&8 != 0 {
		item["due"] = time.UnixMilli(r.n.e.Now() + (int64(s.arg>>4)-8)*qtest.Hour).UTC().Format(time.RFC3339)
	}
	body, _ := json.Marshal([]map[string]string{item})
	code, answer := r.keyOp(g, s, http.MethodPost, "/v1/targets", body, 200)
	if code == 200 && !bytes.Contains(answer, []byte(`"accepted":1`)) {
		r.fail("upsert k%d: %s", s.key, answer)
	}
}

// keyOp runs an operation on one key through the handlers and records it.
func (r *fenceRun) keyOp(g int, s fenceStep, method, target string, body []byte, codes ...int) (int, []byte) {
	o := fenceOp{kind: s.kind, g: g, key: s.key}
	o.start = r.seq.Add(1)
	o.clock0 = r.n.e.Now()
	code, answer := r.serve(method, target, "application/json", body)
	o.end = r.seq.Add(1)
	o.code = code
	if !slices.Contains(codes, code) {
		r.fail("%s: answered %d %s", &o, code, answer)
	}
	r.record(o)
	return code, answer
}

// probe reads the key's row, target and page.
func (r *fenceRun) probe(g, key int) {
	o := fenceOp{kind: fkProbe, g: g, key: key}
	o.start = r.seq.Add(1)
	r.look(&o)
	o.end = r.seq.Add(1)
	r.record(o)
}

func (r *fenceRun) look(o *fenceOp) {
	k := r.keys[o.key]
	st := r.n.e.Store
	row, err := st.GetSchedule(k)
	o.row, o.urgent = err == nil, err == nil && row.Lanes.Urgent
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.fail("probe k%d: %v", o.key, err)
	}
	_, err = st.GetTarget(k)
	o.target = err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.fail("probe k%d: %v", o.key, err)
	}
	_, err = st.GetPage(k)
	o.page = err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		r.fail("probe k%d: %v", o.key, err)
	}
}

// history runs the programs at once, then probes every key, and returns what the checker
// found wrong (nil: every property held).
func (r *fenceRun) history(progs [][]fenceStep) []string {
	var wg sync.WaitGroup
	for g, p := range progs {
		wg.Go(func() { r.play(g, p) })
	}
	wg.Wait()
	for k := range r.keys {
		o := fenceOp{kind: fkProbe, g: -1, key: k, note: "(the end)"}
		o.start = r.seq.Add(1)
		r.look(&o)
		o.end = o.start
		r.ops = append(r.ops, o)
	}
	return append(r.errs, checkFenceHistory(r.ops, r.grants)...)
}

// checkFenceHistory checks P1–P5 over a finished history.
func checkFenceHistory(ops []fenceOp, grants []fenceGrant) []string {
	var bad []string
	report := func(format string, args ...any) {
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	byKey := make([][]*fenceOp, fenceKeys)
	type accepted struct {
		op *fenceOp
		it fenceItem
	}
	var acc [fenceKeys][]accepted
	perGrant := make([][]*fenceOp, len(grants))
	for i := range ops {
		o := &ops[i]
		byKey[o.key] = append(byKey[o.key], o)
		if o.kind != fkResult {
			continue
		}
		for _, it := range o.items {
			if it.fenced {
				continue
			}
			if o.key != it.key {
				byKey[it.key] = append(byKey[it.key], o)
			}
			acc[it.key] = append(acc[it.key], accepted{o, it})
			if it.grant < 0 {
				report("P1: %s: a lease never granted was accepted", o)
				continue
			}
			perGrant[it.grant] = append(perGrant[it.grant], o)
		}
	}
	// P1
	for id, rs := range perGrant {
		if len(rs) > 1 {
			report("P1: grant %d (k%d) accepted %d times: %v", id, grants[id].key, len(rs), rs)
		}
	}
	ok200 := func(o *fenceOp, kinds ...fenceKind) bool { return o.code == 200 && slices.Contains(kinds, o.kind) }
	// P2
	for k := range fenceKeys {
		for _, a := range acc[k] {
			if a.it.grant < 0 {
				continue
			}
			gr, r := grants[a.it.grant], a.op
			if r.clock0 >= gr.expiresMs {
				report("P2: %s: grant %d expired at %d, before the result began", r, a.it.grant, gr.expiresMs)
			}
			for _, x := range byKey[k] {
				if ok200(x, fkDelete, fkRush, fkWait) && x.start > gr.end && x.end < r.start {
					report("P2: %s: grant %d (#%d-%d) was overtaken by %s", r, a.it.grant, gr.start, gr.end, x)
				}
			}
		}
	}
	// witnesses: what each operation saw of its key
	seesRow := func(w *fenceOp, k int) bool {
		switch {
		case w.kind == fkProbe:
			return w.row || w.target || w.page
		case ok200(w, fkDelete, fkRush, fkWait):
			return true
		case w.kind == fkResult && w.applied == 1 && w.skipped == 0:
			n := 0
			for _, it := range w.items {
				if !it.fenced && it.key == k {
					n++
				}
			}
			return n == 1 && w.applied+w.skipped == 1
		}
		return false
	}
	for k := range fenceKeys {
		ops := byKey[k]
		// overtakes reports whether an accepted result of k that could have been applied after
		// x's commit lies between x and w: its grant did not end before x began.
		overtakes := func(x, w *fenceOp) bool {
			for _, a := range acc[k] {
				if a.op.end > x.start && a.op.start < w.end && (a.it.grant < 0 || grants[a.it.grant].end > x.start) {
					return true
				}
			}
			return false
		}
		for _, x := range ops {
			switch {
			case ok200(x, fkDelete): // P3
				for _, w := range ops {
					if w == x || w.start <= x.end || !seesRow(w, k) {
						continue
					}
					if !slices.ContainsFunc(ops, func(u *fenceOp) bool { return u.kind == fkUpsert && u.end > x.start && u.start < w.end }) {
						report("P3: k%d deleted by %s, and seen again by %s with no upsert since", k, x, w)
					}
				}
			case ok200(x, fkRush): // P4
				for _, w := range ops {
					if w.kind != fkProbe || w.start <= x.end || !w.row || w.urgent {
						continue
					}
					deleted := slices.ContainsFunc(ops, func(d *fenceOp) bool { return ok200(d, fkDelete) && d.end > x.start && d.start < w.end })
					if !deleted && !overtakes(x, w) {
						report("P4: k%d rushed by %s, seen without its urgent mark by %s", k, x, w)
					}
				}
			case ok200(x, fkWait): // P5
				for _, w := range ops {
					if w.kind == fkProbe && w.start > x.end && w.page && !overtakes(x, w) {
						report("P5: k%d waited by %s, its page seen again by %s", k, x, w)
					}
				}
			}
		}
	}
	return bad
}

// checkFenceEnd checks the store after a history: the index agrees with the rows, and no row
// lies below the floor (no pass is in progress now).
func checkFenceEnd(t testing.TB, e *qtest.Env) {
	t.Helper()
	rep, err := e.Store.VerifyIndex()
	if err != nil || !rep.OK() {
		t.Fatalf("index: %d rows, %d entries, %d rows without their entry, %d entries without their row, %d corrupt, e.g. %q; %v",
			rep.Rows, rep.Entries, rep.RowsWithoutEntry, rep.EntriesWithoutRow, rep.Corrupt, rep.Examples, err)
	}
	floor := e.Seg.Floor().Load()
	rows, err := e.Store.ScanDue(0, 1<<62, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows.Rows {
		if row.DueAtMs < floor {
			t.Fatalf("F1: row %q due %d is below the floor %d", row.Key, row.DueAtMs, floor)
		}
	}
}

// dumpFenceHistory logs the operations on the keys the findings name, in start order.
func dumpFenceHistory(t testing.TB, ops []fenceOp, bad []string) {
	t.Helper()
	keys := map[int]bool{}
	for _, b := range bad {
		var k int
		if i := strings.Index(b, " k"); i >= 0 {
			if _, err := fmt.Sscanf(b[i+2:], "%d", &k); err == nil {
				keys[k] = true
			}
		}
	}
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b fenceOp) int { return int(a.start - b.start) })
	var sb strings.Builder
	n := 0
	for i := range sorted {
		if o := &sorted[i]; keys[o.key] && o.kind != fkAdvance && n < 400 {
			fmt.Fprintln(&sb, o)
			n++
		}
	}
	t.Logf("history of keys %v:\n%s", keys, sb.String())
}

// fenceProgram draws one goroutine's program: claims and results most often, as a render
// fleet makes them, with deletes, upserts, rushes and waits among them.
func fenceProgram(rng *rand.Rand, steps int) []fenceStep {
	weights := [numFenceKinds]int{fkClaim: 24, fkResult: 24, fkDelete: 8, fkUpsert: 12, fkRush: 7, fkWait: 5, fkProbe: 10, fkAdvance: 8, fkSweep: 2}
	total := 0
	for _, w := range weights {
		total += w
	}
	prog := make([]fenceStep, steps)
	for i := range prog {
		n := rng.IntN(total)
		k := fenceKind(0)
		for ; n >= weights[k]; k++ {
			n -= weights[k]
		}
		s := fenceStep{kind: k, key: rng.IntN(fenceKeys), arg: byte(rng.Uint32())}
		if k == fkResult { // rarer variants rarer
			s.arg &^= resLapse | resForge | resPair | resOther | resTwice | resRace
			for _, b := range []struct {
				bit byte
				in  int
			}{{resLapse, 40}, {resForge, 16}, {resPair, 6}, {resOther, 5}, {resTwice, 4}, {resRace, 4}} {
				if rng.IntN(b.in) == 0 {
					s.arg |= b.bit
				}
			}
			if rng.IntN(3) != 0 {
				s.arg &^= resKeep
			}
		}
		prog[i] = s
	}
	return prog
}

// fenceReason names why a fenced item was fenced, as far as the history tells, for the log:
// it shows which paths a history reached.
func fenceReason(r *fenceRun, o fenceOp, it fenceItem) string {
	if it.grant < 0 {
		return "never granted"
	}
	gr := r.grants[it.grant]
	if o.clock0 >= gr.expiresMs {
		return "lapsed"
	}
	reason := "raced"
	for _, x := range r.ops {
		switch {
		case x.kind == fkResult && x.end < o.start && slices.ContainsFunc(x.items, func(y fenceItem) bool { return y.grant == it.grant && !y.fenced }):
			return "delivered before"
		case x.key == gr.key && x.code == 200 && x.start > gr.end && x.end < o.start && (x.kind == fkDelete || x.kind == fkRush || x.kind == fkWait):
			reason = "revoked by " + x.kind.String()
		}
	}
	return reason
}

// TestFenceHistory runs several histories of 8 goroutines over 8 keys and checks each.
func TestFenceHistory(t *testing.T) {
	const goroutines, steps = 8, 160
	for round := range 4 {
		seed := uint64(round)*0x9e3779b97f4a7c15 + 1
		n := newFenceNode(t)
		r := newFenceRun(t, n, fmt.Sprintf("h%d.test", round))
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		progs := make([][]fenceStep, goroutines)
		for g := range progs {
			progs[g] = fenceProgram(rng, steps)
		}
		if bad := r.history(progs); len(bad) > 0 {
			dumpFenceHistory(t, r.ops, bad)
			t.Fatalf("seed %#x: %d findings:\n%s", seed, len(bad), strings.Join(bad, "\n"))
		}
		checkFenceEnd(t, n.e)
		counts := map[string]int{}
		for _, o := range r.ops {
			counts[o.kind.String()]++
			if o.kind == fkResult {
				for _, it := range o.items {
					if it.fenced {
						counts["fenced: "+fenceReason(r, o, it)]++
					}
				}
				counts["items applied"] += o.applied
				counts["items skipped"] += o.skipped
				for _, x := range r.ops {
					if x.key == o.key && x.code == 200 && (x.kind == fkDelete || x.kind == fkRush || x.kind == fkWait) &&
						x.start < o.end && o.start < x.end {
						counts["results overlapping a delete, rush or wait"]++
						break
					}
				}
			}
		}
		t.Logf("seed %#x: %d ops, %d grants, %v", seed, len(r.ops), len(r.grants), counts)
	}
}

// FuzzFenceHistory runs a history whose programs are the input: byte 0 names the number of
// goroutines (2–5), then each pair of bytes is one step (kind, then key and variant), dealt to
// the goroutines in turn, 48 steps at most. The interleaving is the scheduler's; P1–P5 and the
// end checks must hold for every one. Each input runs over keys of its own, on one node per
// fuzz worker; the keys are deleted and the clock moved past every lease afterwards.
func FuzzFenceHistory(f *testing.F) {
	n := newFenceNode(f)
	var iter atomic.Int64
	step := func(kind fenceKind, key int, arg byte) []byte {
		return []byte{byte(kind) + byte(numFenceKinds)*(arg>>5), byte(key) | arg<<3}
	}
	seed := func(g byte, steps ...[]byte) []byte { return append([]byte{g}, bytes.Join(steps, nil)...) }
	f.Add(seed(2, step(fkClaim, 0, 0), step(fkClaim, 1, 0), step(fkResult, 0, 0), step(fkResult, 1, 0)))
	// a duplicate delivery racing the original, and a lapsed one
	f.Add(seed(3, step(fkClaim, 0, 0), step(fkUpsert, 0, 1), step(fkResult, 0, resKeep),
		step(fkResult, 0, resOther), step(fkResult, 0, resLapse|resKeep), step(fkResult, 0, resTwice|resBinary)))
	// delete, rush and wait racing results
	f.Add(seed(4, step(fkUpsert, 2, 1), step(fkClaim, 2, 0), step(fkUpsert, 3, 2), step(fkClaim, 3, 0),
		step(fkDelete, 2, 0), step(fkRush, 3, 0), step(fkResult, 2, 0), step(fkResult, 3, 0),
		step(fkWait, 3, 0), step(fkProbe, 2, 0), step(fkProbe, 3, 0), step(fkUpsert, 2, 0),
		step(fkSweep, 0, 0), step(fkAdvance, 0, 31), step(fkClaim, 2, 0), step(fkResult, 2, resPair|resForge)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		g := 2 + int(data[0])%4
		progs := make([][]fenceStep, g)
		for i, b := 0, data[1:]; len(b) >= 2 && i < 48; i, b = i+1, b[2:] {
			// the key is in the low 3 bits of the second byte, the variant in the 5 high bits of
			// the second byte and the 3 of the first above the kind (kind = first byte % 9)
			s := fenceStep{kind: fenceKind(b[0] % byte(numFenceKinds)), key: int(b[1] & 7), arg: b[1]>>3 | (b[0]/byte(numFenceKinds))<<5}
			progs[i%g] = append(progs[i%g], s)
		}
		r := newFenceRun(t, n, fmt.Sprintf("i%d.test", iter.Add(1)))
		if bad := r.history(progs); len(bad) > 0 {
			dumpFenceHistory(t, r.ops, bad)
			t.Fatalf("%d findings:\n%s", len(bad), strings.Join(bad, "\n"))
		}
		checkFenceEnd(t, n.e)
		// leave the node as it was: no row of this input, no lease, hold or grace live
		for _, k := range r.keys {
			if err := n.e.Store.DeleteTarget(k); err != nil {
				t.Fatal(err)
			}
		}
		n.e.Advance(fenceTTL + 60_000)
	})
}
