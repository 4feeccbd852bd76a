package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/verdict"
	"github.com/freshq/freshq/wire"
)

// countVerdicts is a VerdictCounter of a test.
type countVerdicts struct {
	mu       sync.Mutex
	reasons  map[string]int
	accepted int
}

func (c *countVerdicts) Suspect(r verdict.Reasons) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reasons == nil {
		c.reasons = map[string]int{}
	}
	for _, n := range r.Names() {
		c.reasons[n]++
	}
}

func (c *countVerdicts) Accepted() { c.mu.Lock(); c.accepted++; c.mu.Unlock() }

// verdictEnv is a store with one target, key, and an Applier that keeps suspects.
type verdictEnv struct {
	e        *qtest.Env
	a        *Applier
	targets  *intake.Targets
	suspects *Suspects
	counts   *countVerdicts
	key      []byte
}

func newVerdictEnv(t *testing.T, neverRendered bool) *verdictEnv {
	t.Helper()
	return newVerdictEnvLog(t, neverRendered, zerolog.Nop())
}

func newVerdictEnvLog(t *testing.T, neverRendered bool, log zerolog.Logger) *verdictEnv {
	t.Helper()
	e := qtest.New(t, "", start, shm.Options{})
	key := []byte("desktop|https://a.test/p/1")
	e.Put(string(key), start-hour, true, 0, store.Lanes{NeverRendered: neverRendered})
	v := &verdictEnv{e: e, key: key, suspects: NewSuspects(), counts: &countVerdicts{}}
	set := qtest.Settings(e, IntakeSettingsOf)
	locks := &intake.KeyLocks{}
	v.a = newApplier(t, ApplierDeps{Store: e.Store, Locks: locks, Seg: e.Seg, Settings: set, Now: e.Now,
		Suspects: v.suspects, Verdicts: v.counts, Log: log})
	v.targets = qtest.Must(intake.NewTargets(intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: set, Now: e.Now}))(t)
	return v
}

// render applies one ok render of body with sig, and lets the release grace pass.
func (v *verdictEnv) render(t *testing.T, body string, sig *wire.Signals) {
	t.Helper()
	r := wire.Result{Key: v.key, Outcome: "ok", Status: 200, Body: []byte(body), Signals: sig,
		Headers: map[string]string{"content-type": "text/html"}, Lease: grant(t, v.e, v.key)}
	if st, err := v.a.Apply([]wire.Result{r}); err != nil || st.Applied != 1 {
		t.Fatalf("apply: %+v %v", st, err)
	}
	v.e.Advance(v.a.d.Settings().ReleaseGrace.Milliseconds() + 1) // past the release grace
}

func (v *verdictEnv) page(t *testing.T) store.Page {
	t.Helper()
	pg, err := v.e.Store.GetPage(v.key)
	if err != nil {
		t.Fatalf("stored page: %v", err)
	}
	return pg
}

func (v *verdictEnv) target(t *testing.T) store.Target {
	t.Helper()
	tg, err := v.e.Store.GetTarget(v.key)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// body returns the served page's body, decoded.
func (v *verdictEnv) served(t *testing.T) string {
	t.Helper()
	sp, err := v.targets.Page(v.key)
	if err != nil {
		t.Fatalf("the page is not servable: %v", err)
	}
	b, err := intake.PlainBody(&sp.Page)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	goodBody    = "<html><title>Shoe</title><h1>Shoe</h1><p>" + strings.Repeat("A fine shoe. ", 40) + "</p></html>"
	suspectBody = "<html><title>Oops</title><p>Something went wrong</p></html>"
	thrown      = &wire.Signals{Exceptions: 1, Evidence: []string{"TypeError: x is undefined"}}
)

// A suspect render over a good page is not applied: the stored page stays byte for byte what it
// was, and servable; the row is retried as a transient failure of class suspect after policy's
// backoff; the suspect body is kept for inspection, counted and its agreement begun.
func TestASuspectRenderLeavesTheGoodPageServed(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	before := v.page(t)
	if tg := v.target(t); !tg.Verdict.HasGood || tg.Verdict.Marked || tg.Verdict.Reasons != 0 {
		t.Fatalf("after a good render: verdict %+v, want a good render known", tg.Verdict)
	}

	now := v.e.Now()
	v.render(t, suspectBody, thrown)
	if after := v.page(t); !reflect.DeepEqual(after, before) {
		t.Fatalf("the stored page changed under a suspect render: now %.40q rendered at %d, was %.40q at %d",
			after.Body, after.RenderedAtMs, before.Body, before.RenderedAtMs)
	}
	if got := v.served(t); got != goodBody {
		t.Fatalf("served %q, want the good page", got)
	}
	tg := v.target(t)
	if tg.Failures.LastClass != SuspectClass || tg.Failures.Count != 1 {
		t.Fatalf("failures %+v, want one of class %q", tg.Failures, SuspectClass)
	}
	want := verdict.Exception | verdict.TextCollapsed | verdict.LostH1
	if verdict.Reasons(tg.Verdict.Reasons) != want || tg.Verdict.AtMs != now || tg.Verdict.Agree.Count != 1 || tg.Verdict.Marked {
		t.Fatalf("verdict %+v (%v), want %v at %d, agreement of 1, not marked", tg.Verdict, verdict.Reasons(tg.Verdict.Reasons), want, now)
	}
	row, err := v.e.Store.GetSchedule(v.key)
	if err != nil {
		t.Fatal(err)
	}
	backoff := v.e.Policy().Backoff(1, true)
	if row.DueAtMs != now+backoff || !row.Lanes.Failing {
		t.Fatalf("row due %d (failing %v), want retried after the transient backoff at %d", row.DueAtMs, row.Lanes.Failing, now+backoff)
	}
	kept, ok := v.suspects.Get(v.key)
	if !ok || string(kept.Body) != suspectBody || kept.Reasons != want || kept.Agree != 1 {
		t.Fatalf("kept suspect %+v %v, want its body", kept, ok)
	}
	if c := v.counts.reasons; c["exception"] != 1 || c["text_collapsed"] != 1 || c["lost_h1"] != 1 || len(c) != 3 {
		t.Fatalf("suspects counted %v, want one each of exception, text_collapsed, lost_h1", c)
	}
	// A second suspect continues the suspects' own streak.
	v.e.Advance(backoff)
	v.render(t, suspectBody, thrown)
	if tg := v.target(t); tg.Failures.LastClass != SuspectClass || tg.Failures.Count != 2 || tg.Verdict.Agree.Count != 2 {
		t.Fatalf("second suspect: failures %+v, agreement %+v", tg.Failures, tg.Verdict.Agree)
	}
	if after := v.page(t); !reflect.DeepEqual(after, before) {
		t.Fatal("the stored page changed under a second suspect render")
	}
}

// A renderer that runs no scripts gives no signals: a maintenance page served with 200 is
// suspect by what it lost of the good page alone, and the good page stays served.
func TestAMaintenancePageWithoutSignalsIsSuspect(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	before := v.page(t)
	v.render(t, "<html><title>Shoe</title><p>Down for maintenance, back soon.</p></html>", nil)
	if after := v.page(t); !reflect.DeepEqual(after, before) {
		t.Fatalf("a maintenance page replaced the good page: now %.40q", after.Body)
	}
	if tg := v.target(t); verdict.Reasons(tg.Verdict.Reasons) != verdict.TextCollapsed|verdict.LostH1 || tg.Failures.LastClass != SuspectClass {
		t.Fatalf("verdict %v, failures %+v; want text_collapsed,lost_h1 retried as a suspect", verdict.Reasons(tg.Verdict.Reasons), tg.Failures)
	}
}

// Agreement decides: Agree (3) suspect renders with one content over at least AgreeSpan (30m)
// are the site's real change, applied as the page; fewer, or a shorter span, are not, and a
// render of other content starts the run again.
func TestSuspectsAgreeingOverTheSpanAreApplied(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	first := v.e.Now()
	step := func(at time.Duration, body string) {
		t.Helper()
		v.e.Advance(first + at.Milliseconds() - v.e.Now())
		v.render(t, body, thrown)
	}
	step(0, suspectBody)
	step(10*time.Minute, suspectBody)
	step(12*time.Minute, suspectBody+"<!-- other -->") // another content: a new run of one
	step(20*time.Minute, suspectBody+"<!-- other -->")
	step(25*time.Minute, suspectBody+"<!-- other -->") // 3 in a row over 13 minutes: not yet
	if got, ag := v.served(t), v.target(t).Verdict.Agree; got != goodBody || ag.Count != 3 || ag.FirstMs != first+(12*time.Minute).Milliseconds() {
		t.Fatalf("three agreeing over 13m: served %.30q, agreement %+v; want the good page, a run of 3", got, ag)
	}
	step(41*time.Minute, suspectBody+"<!-- other -->") // 4 over 29 minutes: not yet
	if got := v.served(t); got != goodBody {
		t.Fatalf("four agreeing over 29m: served %.30q, want the good page", got)
	}
	if v.counts.accepted != 0 {
		t.Fatalf("%d accepted before the span", v.counts.accepted)
	}
	step(42*time.Minute, suspectBody+"<!-- other -->") // 5 over 30 minutes: agreed
	if got := v.served(t); got != suspectBody+"<!-- other -->" {
		t.Fatalf("five agreeing over 30m: served %.30q, want the new content", got)
	}
	tg := v.target(t)
	if !tg.Verdict.HasGood || tg.Verdict.Agree != (store.Agreement{}) || tg.Verdict.Marked || tg.Failures.Count != 0 {
		t.Fatalf("after agreement: verdict %+v failures %+v; want it the good render, agreement cleared, no failures", tg.Verdict, tg.Failures)
	}
	if _, ok := v.suspects.Get(v.key); ok || v.counts.accepted != 1 {
		t.Fatalf("after agreement: kept %v, accepted %d; want none kept, one accepted", ok, v.counts.accepted)
	}
	// Its content is the good one now: the same render again is never suspect.
	v.e.Advance(hour)
	v.render(t, suspectBody+"<!-- other -->", thrown)
	if tg := v.target(t); tg.Verdict.Reasons != 0 || tg.Failures.Count != 0 {
		t.Fatalf("the accepted content rendered again: verdict %+v failures %+v, want good (unchanged)", tg.Verdict, tg.Failures)
	}
}

// A page with no good render stores its first render even when it is suspect, marked; the
// next render replaces it as any render would, and a good one clears the mark.
func TestAFirstRenderJudgedSuspectIsStoredAndMarked(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, suspectBody, thrown)
	if got := v.served(t); got != suspectBody {
		t.Fatalf("served %.30q, want the first render though suspect", got)
	}
	if tg := v.target(t); !tg.Verdict.Marked || tg.Verdict.HasGood || tg.Failures.Count != 0 {
		t.Fatalf("verdict %+v failures %+v, want marked, no good render, no failure", tg.Verdict, tg.Failures)
	}
	if _, ok := v.suspects.Get(v.key); ok {
		t.Fatal("a suspect stored as the page is kept besides")
	}
	v.e.Advance(hour)
	other := suspectBody + "<p>again</p>"
	v.render(t, other, thrown)
	if got := v.served(t); got != other {
		t.Fatalf("served %.30q, want the next render to replace a marked page", got)
	}
	v.e.Advance(hour)
	v.render(t, goodBody, nil)
	if tg := v.target(t); tg.Verdict.Marked || !tg.Verdict.HasGood || v.served(t) != goodBody {
		t.Fatalf("after a good render: verdict %+v, want the mark cleared and the good render known", tg.Verdict)
	}
}

// An operator's accept applies the kept suspect as the page at once, in place of agreement.
func TestAcceptAppliesTheKeptSuspect(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	if _, err := v.a.Accept(v.key); !errors.Is(err, intake.ErrNotFound) || fieldOf(err) != "url" {
		t.Fatalf("accept with nothing kept: %v, want not found naming url", err)
	}
	v.render(t, suspectBody, thrown)
	lastRender := v.target(t).LastRender
	if _, err := v.a.Accept(v.key); err != nil {
		t.Fatal(err)
	}
	if got := v.served(t); got != suspectBody {
		t.Fatalf("served %.30q after accept, want the kept suspect", got)
	}
	tg := v.target(t)
	if !tg.Verdict.HasGood || tg.Verdict.Reasons != 0 || tg.Verdict.Agree.Count != 0 || tg.Failures.Count != 0 || tg.LastRender != lastRender {
		t.Fatalf("after accept: %+v; want it the good render, no failures, the last render unchanged", tg)
	}
	if _, ok := v.suspects.Get(v.key); ok || v.counts.accepted != 1 {
		t.Fatalf("after accept: kept %v, accepted %d", ok, v.counts.accepted)
	}
	if _, err := v.a.Accept(v.key); !errors.Is(err, intake.ErrNotFound) {
		t.Fatalf("a second accept: %v, want not found", err)
	}
}

func fieldOf(err error) string {
	var fe *intake.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// The kept bodies are bounded in bytes: one per key, the newest winning, the oldest evicted.
func TestSuspectsKeepTheNewestWithinTheirBytes(t *testing.T) {
	s := NewSuspects()
	put := func(key string, n int) {
		s.Put(&Suspect{Key: key, Site: "a.test", Body: bytes.Repeat([]byte("x"), n)}, 100)
	}
	put("k1", 40)
	put("k2", 40)
	put("k1", 30) // replaces k1's, and is the newest
	if s.Bytes() != 2+40+2+30 {
		t.Fatalf("kept %d bytes", s.Bytes())
	}
	put("k3", 40) // over 100: the oldest (k2) goes
	if _, ok := s.Get([]byte("k2")); ok {
		t.Fatal("the oldest entry was not evicted")
	}
	if list := s.Site("a.test"); len(list) != 2 || list[0].Key != "k3" || list[1].Key != "k1" {
		t.Fatalf("site list %v, want k3 then k1", list)
	}
	put("k4", 200) // larger than the bound: not kept, and evicts nothing
	if _, ok := s.Get([]byte("k4")); ok || s.Bytes() != 2+30+2+40 {
		t.Fatalf("an entry over the bound was kept (%d bytes)", s.Bytes())
	}
}

// judgmentFor returns a judgment that verdict.Judge finds exactly reasons in, compared with
// lastGood (every landmark, 1000 bytes of text) under an Expect.
func judgmentFor(reasons verdict.Reasons) *judgment {
	j := &judgment{signals: &wire.Signals{}, expect: &verdict.Expect{}, found: reasons&verdict.ExpectMissing == 0,
		landmarks: verdict.Landmarks{TextLen: 1000, Title: true, H1: true, Description: true, Canonical: true}}
	if reasons&verdict.Exception != 0 {
		j.signals.Exceptions = 2
	}
	if reasons&verdict.FailedRequest != 0 {
		j.signals.FailedRequests = 1
	}
	if reasons&verdict.PendingRequest != 0 {
		j.signals.PendingRequests = 3
	}
	if reasons&verdict.TextCollapsed != 0 {
		j.landmarks.TextLen = 10
	}
	j.landmarks.Title = reasons&verdict.LostTitle == 0
	j.landmarks.H1 = reasons&verdict.LostH1 == 0
	j.landmarks.Description = reasons&verdict.LostDescription == 0
	j.landmarks.Canonical = reasons&verdict.LostCanonical == 0
	return j
}

var lastGood = store.Landmarks{TextLen: 1000, Title: true, H1: true, Description: true, Canonical: true}

// V1: no verdict makes a servable page unservable. For every set of reasons (each alone, and
// every combination), and whatever was stored before (a good page, a marked one, none), a page
// that was servable before a judged render is applied is servable after it; a good page is
// left byte for byte as it was.
func TestNoVerdictMakesAServablePageUnservable(t *testing.T) {
	all := verdict.Reasons(1<<len(verdict.AllNames()) - 1)
	e := qtest.New(t, "", start, shm.Options{})
	set := qtest.Settings(e, IntakeSettingsOf)
	targets := qtest.Must(intake.NewTargets(intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: set, Now: e.Now}))(t)
	n := 0
	for r := verdict.Reasons(0); r <= all; r++ {
		if bits.OnesCount32(uint32(r)) > 3 && r != all {
			continue // each reason, every pair and triple, and all of them
		}
		for _, before := range []string{"good", "marked", "none"} {
			key := []byte(fmt.Sprintf("desktop|https://a.test/v1/%d/%s", r, before))
			e.Put(string(key), start-hour, true, 0, store.Lanes{NeverRendered: before != "good"})
			var old *store.Page
			if before != "none" {
				tg := targetFromKey(key, true)
				tg.Verdict = store.Verdict{HasGood: before == "good", Good: lastGood, GoodDigest: 1, AtMs: 1, Marked: before == "marked"}
				if before == "marked" {
					tg.Verdict.Good, tg.Verdict.GoodDigest = store.Landmarks{}, 0
				}
				old = &store.Page{Status: 200, Body: []byte("<p>before</p>"), RenderedAtMs: e.Now()}
				sch := qtest.Must(store.NewSchedule(key, e.Now()+hour, true, 0, store.Lanes{NeverRendered: before != "good"}))(t)
				if err := e.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &tg, Page: old}}); err != nil {
					t.Fatal(err)
				}
				if _, err := targets.Page(key); err != nil {
					t.Fatalf("%s page not servable before: %v", before, err)
				}
			}
			j := judgmentFor(r)
			res := wire.Result{Key: key, Outcome: "ok", Status: 200, Body: []byte("<p>after</p>")}
			var vo verdictOutcome
			var sv servedStale
			if _, err := e.Store.Modify([]store.Change{{Key: key, MinDueMs: e.Now(), Decide: func(cur store.Current) (store.Write, bool, error) {
				return decide(set(), nil, &res, set().Resolve(key), cur, 2, j, nil, e.Now(), &sv, &vo)
			}}}); err != nil {
				t.Fatal(err)
			}
			if before == "good" && vo.reasons != r {
				t.Fatalf("reasons %v: judged %v", r, vo.reasons)
			}
			sp, err := targets.Page(key)
			switch {
			case before != "none" && err != nil:
				t.Fatalf("reasons %v over a %s page: the page was servable and is not: %v", r, before, err)
			case before == "none" && err != nil:
				t.Fatalf("reasons %v, no page before: the render was not stored: %v", r, err)
			case before == "good" && r != 0 && !reflect.DeepEqual(sp.Page, *old):
				t.Fatalf("reasons %v over a good page: it changed to %q", r, sp.Body)
			}
			n++
		}
	}
	t.Logf("%d judged renders, every one leaving a servable page servable", n)
}

// A result's signals are evidence for its verdict: ones no renderer sends (a negative count,
// evidence past its bounds) refuse the batch by name, results[i].signals, before anything is
// applied.
func TestValidateRefusesSignalsPastTheirBounds(t *testing.T) {
	v := newVerdictEnv(t, true)
	ok := wire.Result{Key: v.key, Outcome: "ok", Status: 200, Body: []byte("x"), Lease: wire.Lease{Slot: 1, KeyHash: shm.KeyHash(v.key)}}
	for name, s := range map[string]*wire.Signals{
		"negative exceptions":  {Exceptions: -1},
		"negative pending":     {PendingRequests: -3},
		"too many evidence":    {Evidence: []string{"a", "b", "c", "d", "e"}},
		"a long evidence line": {Evidence: []string{strings.Repeat("x", 257)}},
	} {
		r := ok
		r.Signals = s
		if field, err := v.a.Validate([]wire.Result{ok, r}); field != "results[1].signals" || err == nil {
			t.Errorf("%s: %q %v, want results[1].signals refused", name, field, err)
		}
	}
	r := ok
	r.Signals = &wire.Signals{Exceptions: 2, FailedRequests: 1, Evidence: []string{strings.Repeat("x", 256), "b", "c", "d"}}
	if field, err := v.a.Validate([]wire.Result{r}); err != nil {
		t.Fatalf("signals within bounds: %s %v", field, err)
	}
}

// A page stored before verdicts were kept (a target with no verdict state, its page rendered
// well) is the good page there is: a suspect render is not applied over it, and a render of the
// same content (the digest the target kept of its last full render) is never suspect.
func TestAPageStoredBeforeVerdictsIsTheGoodOne(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	tg := v.target(t)
	tg.Verdict = store.Verdict{} // as a version of before the verdicts wrote it
	sch := qtest.Must(store.NewSchedule(v.key, v.e.Now(), true, 0, store.Lanes{}))(t)
	if err := v.e.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &tg}}); err != nil {
		t.Fatal(err)
	}
	before := v.page(t)
	v.render(t, suspectBody, thrown)
	if after := v.page(t); !reflect.DeepEqual(after, before) {
		t.Fatalf("a suspect replaced a page stored before verdicts: now %.40q", after.Body)
	}
	v.e.Advance(hour)
	v.render(t, goodBody, thrown) // the stored content again, with an exception seen
	if tg := v.target(t); tg.Verdict.Reasons != 0 || !tg.Verdict.HasGood || tg.Failures.Count != 0 {
		t.Fatalf("the stored content rendered again: verdict %+v failures %+v, want good", tg.Verdict, tg.Failures)
	}
}

// Each suspect render is one JSON log line with stable field names: the key and URL, the
// reasons' names, the agreement's count, the content digest, and whether it was applied.
func TestASuspectRenderIsLogged(t *testing.T) {
	var buf bytes.Buffer
	v := newVerdictEnvLog(t, true, zerolog.New(&buf))
	v.render(t, goodBody, nil)
	if strings.Contains(buf.String(), "render suspect") {
		t.Fatalf("a good render was logged as suspect: %s", buf.String())
	}
	v.render(t, suspectBody, thrown)
	var line struct {
		Message    string   `json:"message"`
		Key        string   `json:"key"`
		URL        string   `json:"url"`
		Reasons    []string `json:"reasons"`
		AgreeCount int      `json:"agree_count"`
		Digest     string   `json:"digest"`
		Applied    *bool    `json:"applied"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if line.Message != "render suspect" || line.Key != string(v.key) || line.URL != "https://a.test/p/1" ||
		strings.Join(line.Reasons, ",") != "exception,text_collapsed,lost_h1" || line.AgreeCount != 1 || line.Digest == "" ||
		line.Applied == nil || *line.Applied {
		t.Fatalf("log line %+v", line)
	}
}

// A route's expect (routes[].expect, through the node's settings) judges its pages: a render
// without what every good page of the route has is suspect (expect_missing) even when nothing
// else is lost; a page of another route is not asked for it.
func TestARoutesExpectJudgesItsPages(t *testing.T) {
	e := qtest.New(t, `
routes:
  - {name: product, match: prefix, path: /p/, expect: {selector: "#add-to-cart"}}
`, start, shm.Options{})
	set := qtest.Settings(e, IntakeSettingsOf)
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: set, Now: e.Now, Suspects: NewSuspects()})
	apply := func(key []byte, body string) store.Target {
		t.Helper()
		if st, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte(body), Lease: grant(t, e, key)}}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		e.Advance(set().ReleaseGrace.Milliseconds() + 1)
		tg, err := e.Store.GetTarget(key)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	product, blog := []byte("desktop|https://a.test/p/1"), []byte("desktop|https://a.test/blog/1")
	for _, k := range [][]byte{product, blog} {
		e.Put(string(k), start-hour, true, 0, store.Lanes{NeverRendered: true})
	}
	with := `<title>Shoe</title><h1>Shoe</h1><button id="add-to-cart">Add</button>`
	without := `<title>Shoe</title><h1>Shoe</h1><p>Sold out</p>`
	if tg := apply(product, with); tg.Verdict.Reasons != 0 || !tg.Verdict.HasGood {
		t.Fatalf("a product page with its button: %+v", tg.Verdict)
	}
	if tg := apply(product, without); verdict.Reasons(tg.Verdict.Reasons) != verdict.ExpectMissing || tg.Failures.LastClass != SuspectClass {
		t.Fatalf("a product page without its button: %v, failures %+v", verdict.Reasons(tg.Verdict.Reasons), tg.Failures)
	}
	apply(blog, with)
	if tg := apply(blog, without); tg.Verdict.Reasons != 0 {
		t.Fatalf("a page of another route was asked for the product's expect: %v", verdict.Reasons(tg.Verdict.Reasons))
	}
}

// An operator's wait drops the stored page: no good page is left to keep, so the next render
// is stored whatever its verdict (marked when suspect), as a page never rendered well would be.
func TestAfterAWaitTheNextRenderIsStored(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	if _, err := v.targets.Prioritize(wire.PrioritizeRequest{URL: "https://a.test/p/1", Mode: "wait"}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.Store.GetPage(v.key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after a wait the page reads %v, want none", err)
	}
	v.e.Advance(hour)
	v.render(t, suspectBody, thrown)
	if got := v.served(t); got != suspectBody {
		t.Fatalf("served %.30q, want the render after the wait though suspect", got)
	}
	if tg := v.target(t); !tg.Verdict.Marked || tg.Failures.Count != 0 {
		t.Fatalf("verdict %+v failures %+v, want marked, no failure", tg.Verdict, tg.Failures)
	}
	v.e.Advance(hour)
	v.render(t, goodBody, nil)
	if tg := v.target(t); tg.Verdict.Marked || !tg.Verdict.HasGood || v.served(t) != goodBody {
		t.Fatalf("after a good render: %+v", tg.Verdict)
	}
}

// V1 over histories: random sequences of renders (good pages, error pages, maintenance pages,
// empty shells; with and without a browser's signals), waits and accepts, applied through the
// Applier at random intervals. After every step, a page that was servable before it is
// servable after it, and a good page is replaced only by a good render, an agreement or an
// accept.
func TestNoHistoryMakesAServablePageUnservable(t *testing.T) {
	bodies := []string{goodBody, goodBody + "<p>more stock</p>", suspectBody,
		"<html><title>Shoe</title><p>Down for maintenance</p></html>", "<html><div id=app></div></html>",
		"<html><title>Shoe</title><h1>Shoe</h1><p>Loading…</p></html>"}
	signals := []*wire.Signals{nil, nil, thrown, {PendingRequests: 2}, {FailedRequests: 1}}
	var kept, replacedByGood int
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		v := newVerdictEnv(t, true)
		for step := range 60 {
			before, servable := v.targets.Page(v.key)
			tgBefore, _ := v.e.Store.GetTarget(v.key) // none before the first render
			var what string
			switch r := rng.IntN(20); {
			case r == 0:
				what = "wait"
				if _, err := v.targets.Prioritize(wire.PrioritizeRequest{URL: "https://a.test/p/1", Mode: "wait"}); err != nil {
					t.Fatal(err)
				}
			case r == 1:
				what = "accept"
				_, _ = v.a.Accept(v.key)
			default:
				b, s := bodies[rng.IntN(len(bodies))], signals[rng.IntN(len(signals))]
				what = fmt.Sprintf("render %.20q signals %+v", b, s)
				v.render(t, b, s)
			}
			after, err := v.targets.Page(v.key)
			if servable == nil && err != nil && what != "wait" {
				t.Fatalf("seed %d step %d (%s): the page was servable and is not: %v", seed, step, what, err)
			}
			tg := v.target(t)
			good := tgBefore.Verdict.HasGood && !tgBefore.Verdict.Marked && servable == nil
			changed := servable == nil && (err != nil || !bytes.Equal(after.Body, before.Body) || after.RenderedAtMs != before.RenderedAtMs)
			if good && !changed && tg.Failures.LastClass == SuspectClass {
				kept++
			}
			if good && changed {
				replacedByGood++
			}
			// A good page that changed was replaced by the render that is the good one now.
			if good && changed && what != "wait" && what != "accept" && (!tg.Verdict.HasGood || tg.Verdict.Marked || tg.Verdict.Agree.Count != 0) {
				t.Fatalf("seed %d step %d (%s): a suspect replaced a good page (verdict %+v)", seed, step, what, tg.Verdict)
			}
			v.e.Advance(int64(rng.IntN(20)) * 60_000)
		}
	}
	t.Logf("good pages kept under a suspect render %d times, replaced by a good render or an agreement %d times", kept, replacedByGood)
	if kept == 0 || replacedByGood == 0 {
		t.Fatal("the histories did not exercise both cases")
	}
}

// A site whose pages throw on every load (a third-party widget, say) has that exception in its
// good render too: its next render, with new content and the same exception, is good and
// applied, and only a render that throws more than the good one did is suspect by it.
func TestSignalsAreJudgedAgainstTheGoodRenders(t *testing.T) {
	v := newVerdictEnv(t, true)
	span := verdictSettings(v.a.d.Settings()).AgreeSpan.Milliseconds()
	// No good render to compare with: each throwing render is stored, marked, until renders of
	// the same content agree over the span and it becomes the good one, exception and all.
	for range 3 {
		v.render(t, goodBody, thrown)
		v.e.Advance(span / 2)
	}
	tg := v.target(t)
	if !tg.Verdict.HasGood || tg.Verdict.Marked || tg.Verdict.Good.Exceptions != 1 {
		t.Fatalf("after agreeing renders that threw once: verdict %+v, want a good render with its exception kept", tg.Verdict)
	}
	changed := strings.Replace(goodBody, "A fine shoe.", "A finer shoe.", 1)
	v.render(t, changed, thrown)
	if got := v.served(t); got != changed {
		t.Fatalf("a render with the site's usual exception and new content: served %.60q, want the new content", got)
	}
	twice := &wire.Signals{Exceptions: 2}
	v.render(t, strings.Replace(changed, "finer", "finest", 1), twice)
	if got := v.served(t); got != changed {
		t.Fatalf("a render that threw twice where the good one threw once replaced the page: %.60q", got)
	}
	if r := verdict.Reasons(v.target(t).Verdict.Reasons); r != verdict.Exception {
		t.Fatalf("reasons %v, want exception", r)
	}
	// An operator accepts it: its two exceptions become the site's usual.
	if _, err := v.a.Accept(v.key); err != nil {
		t.Fatal(err)
	}
	if g := v.target(t).Verdict.Good; g.Exceptions != 2 {
		t.Fatalf("after an accept: good landmarks %+v, want the accepted render's two exceptions", g)
	}
	latest := strings.Replace(changed, "finer", "latest", 1)
	v.render(t, latest, twice)
	if got := v.served(t); got != latest {
		t.Fatalf("after the accept, a render with two exceptions and new content: served %.60q, want it", got)
	}
}

// A suspect is rendered again with a cold cache before it is believed: it raises the cache
// epoch, so the node's browsers fetch the site's scripts anew for the retry (a deploy's new
// app.js under a URL the browser cached is one cause a warm retry would repeat). At most once
// a minute, so that a site answering errors on every page does not keep the node's browsers
// cold.
func TestASuspectRendersItsRetryWithAColdCache(t *testing.T) {
	v := newVerdictEnv(t, true)
	v.render(t, goodBody, nil)
	epoch := v.e.Seg.CacheEpoch()
	v.render(t, suspectBody, nil)
	if got := v.e.Seg.CacheEpoch(); got != epoch+1 {
		t.Fatalf("after a suspect: cache epoch %d, want %d", got, epoch+1)
	}
	v.render(t, suspectBody+" ", nil)
	if got := v.e.Seg.CacheEpoch(); got != epoch+1 {
		t.Fatalf("a second suspect within the minute raised the cache epoch again: %d", got)
	}
	v.e.Advance(time.Minute.Milliseconds())
	v.render(t, suspectBody+"  ", nil)
	if got := v.e.Seg.CacheEpoch(); got != epoch+2 {
		t.Fatalf("a suspect a minute later: cache epoch %d, want %d", got, epoch+2)
	}
}
