package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
)

// Freshness of content, end to end with the http renderer: an origin whose pages change on a
// known schedule of the processes' clock — three change as a Poisson process at one change
// every 2 minutes (each minute the clock moves, a page changes with probability 1 − e^{−½},
// from a fixed seed), three never change — is rendered every minute for 40 minutes of that
// clock. Every page's estimated change interval converges to the truth: the changing pages'
// within 35 % of 2 minutes (the estimator's standard error after 40 renders at λτ = ½ is about
// 20 %, and the sequence is fixed by the seed), the unchanging pages' past 20 minutes (their
// prior said one minute). The origin sends an ETag and answers If-None-Match with 304, so the
// unchanging pages are verified by conditional checks, not rendered: at most one render in
// freshness.conditional_every (10) of theirs is a full one, and the 304s are counted in
// freshq_render_conditional_total{result="not_modified"}.
func TestEndToEndFreshnessLearnsChangeAndChecksCheaply(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	const steps, changing, still = 40, 3, 3
	type page struct {
		version int
		full    int // 200s served (a check answered 200 and the render after it are two)
		checks  int // 304s served
	}
	var mu sync.Mutex
	pages := map[string]*page{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		etag := fmt.Sprintf(`"v%d"`, p.version)
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			p.checks++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		p.full++
		w.Header().Set("Content-Type", "text/html")
		// What changes on every load (a nonce, the time) must not count as a change.
		fmt.Fprintf(w, `<!doctype html><script nonce="%d"></script><p>%s version %d</p><footer>%s</footer>`,
			rand.Int64(), r.URL.Path, p.version, time.Now().UTC().Format(time.RFC3339Nano))
	}))
	defer origin.Close()
	var urls []string
	for i := range changing + still {
		path := fmt.Sprintf("/f/%d", i)
		pages[path] = &page{}
		urls = append(urls, origin.URL+path)
	}
	n := startNode(t, t.TempDir(), 2, missYAML, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	upsertEveryMinute(t, n, urls)
	// Each step waits until every page was observed (rendered or checked) after the clock moved.
	observedSince := func(since time.Time) func() bool { return allObservedSince(t, n, urls, since) }
	waitFor(t, "the first renders", 60*time.Second, observedSince(time.Time{}.Add(1)))
	rng := rand.New(rand.NewPCG(31, 7))
	pChange := 1 - math.Exp(-0.5)
	for s := range steps {
		before := explain(t, n, urls[0]).Freshness.ObservedAt
		mu.Lock()
		for i := range changing {
			if rng.Float64() < pChange {
				pages[fmt.Sprintf("/f/%d", i)].version++
			}
		}
		mu.Unlock()
		n.advanceClock(time.Minute)
		waitFor(t, fmt.Sprintf("step %d's observations", s), 60*time.Second, observedSince(before.Add(30*time.Second)))
	}
	mu.Lock()
	defer mu.Unlock()
	for i, u := range urls {
		f := explain(t, n, u).Freshness
		p := pages[fmt.Sprintf("/f/%d", i)]
		t.Logf("%s: %d versions, %d full renders, %d 304s; estimated change interval %.0f s (%v changed over %.1f h, %.1f h unchanged)",
			u, p.version, p.full, p.checks, f.ChangeIntervalSec, f.Changed, f.ChangedHours, f.UnchangedHours)
		if i < changing {
			if math.Abs(f.ChangeIntervalSec-120)/120 > 0.35 {
				t.Errorf("%s changes every 2 min on average: estimated every %.0f s, outside 35 %%", u, f.ChangeIntervalSec)
			}
			continue
		}
		if f.ChangeIntervalSec < 20*60 && f.ChangeIntervalSec != 0 {
			t.Errorf("%s never changes: estimated every %.0f s, want past 20 min", u, f.ChangeIntervalSec)
		}
		if p.checks < steps*8/10 || p.full > steps/10+2 {
			t.Errorf("%s: %d full renders and %d 304s over %d observations: the 304 path is not taken", u, p.full, p.checks, steps+1)
		}
	}
	if got := n.metrics()[`freshq_render_conditional_total{result="not_modified"}`]; got < float64(still*steps*8/10) {
		t.Errorf("freshq_render_conditional_total{result=\"not_modified\"} = %v, want at least %d", got, still*steps*8/10)
	}
}

// Under queue.policy freshness, end to end: a page rendered through the real processes is
// filed with its rank interval, and once due it ranks by lateness ÷ that interval (at least
// policy.MinRankInterval, a millisecond: a rank interval is not clamped to a cadence's minute),
// not ÷ its cadence. The page, on the node's 24 h catalog route, is taken to be asked for 600
// times an hour before any request is counted (freshness.requests), so at ν 1 it is worth
// rendering at its floor: due 90 minutes (24 h ÷ 16) after its render, its value growing past
// ν in under two minutes. Its second render is held at the origin, so the row
// stays as the first render filed it while it is explained.
func TestEndToEndFreshnessRanksByRankInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	release := make(chan struct{})
	var mu sync.Mutex
	served := 0
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served++
		first := served == 1
		mu.Unlock()
		if !first {
			<-release // the second render waits until the test ends
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><p>hot</p>`)
	}))
	defer origin.Close()
	defer close(release) // before the origin closes: Close waits for the held render's handler
	n := startNode(t, t.TempDir(), 2, `queue: {policy: freshness, ready: {sweep_interval: 1s}}
freshness: {threshold: 1, requests: 600}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 120s
  domains: ["127.0.0.1"]
`, "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	u := origin.URL + "/c/1"
	var up struct{ Accepted int }
	if code := n.post("/v1/targets", []map[string]any{{"url": u}}, &up); code != http.StatusOK || up.Accepted != 1 {
		t.Fatalf("upsert: %d %+v", code, up)
	}
	waitFor(t, "the first render", 60*time.Second, func() bool {
		f := explain(t, n, u).Freshness
		return f != nil && !f.ObservedAt.IsZero()
	})
	first := explain(t, n, u)
	f := first.Freshness
	if f.Policy != "freshness" || f.RankIntervalSec <= 0 || math.Abs(first.DueInSec-f.IntervalSec) > 5 {
		t.Fatalf("after the first render: policy %s, due in %.0f s, interval %.0f s, rank interval %.1f s: not filed by freshness",
			f.Policy, first.DueInSec, f.IntervalSec, f.RankIntervalSec)
	}
	if f.IntervalSec != 90*60 || first.Cadence.Seconds != 86400 {
		t.Fatalf("interval %.0f s, cadence %.0f s: want the floor, 5400 s, of the 24 h route", f.IntervalSec, first.Cadence.Seconds)
	}
	n.advanceClock(95 * time.Minute) // 5 minutes past due; the second render hangs at the origin
	waitFor(t, "the second render to be taken", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return served >= 2
	})
	late := explain(t, n, u)
	rankSec := max(late.Freshness.RankIntervalSec, 0.001) // policy.MinRankInterval
	boost := config.Default().Queue.Ready.SubmittedBoost  // posted through the API: submitted
	want := -late.DueInSec / rankSec * boost
	if late.DueInSec >= 0 || math.Abs(late.Score/want-1) > 1e-3 {
		t.Fatalf("late by %.0f s with a rank interval of %.1f s (cadence %.0f s): score %v, want lateness ÷ rank interval × boost = %v (÷ cadence: %v)",
			-late.DueInSec, late.Freshness.RankIntervalSec, late.Cadence.Seconds, late.Score, want, -late.DueInSec/late.Cadence.Seconds*boost)
	}
}

// upsertEveryMinute files urls on n with an interval of a minute, and fails t unless every one
// was accepted.
func upsertEveryMinute(t *testing.T, n *node, urls []string) {
	t.Helper()
	var items []map[string]any
	for _, u := range urls {
		items = append(items, map[string]any{"url": u, "interval": "1m"})
	}
	var up struct{ Accepted int }
	if code := n.post("/v1/targets", items, &up); code != http.StatusOK || up.Accepted != len(urls) {
		t.Fatalf("upsert: %d %+v", code, up)
	}
}

// allObservedSince is a condition for waitFor: every page of urls was observed (rendered, or
// checked with a conditional GET) on n at or after since, as GET /v1/targets/explain says.
func allObservedSince(t *testing.T, n *node, urls []string, since time.Time) func() bool {
	return func() bool {
		for _, u := range urls {
			if f := explain(t, n, u).Freshness; f == nil || f.ObservedAt.Before(since) {
				return false
			}
		}
		return true
	}
}
