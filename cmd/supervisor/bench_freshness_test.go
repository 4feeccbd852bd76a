package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/freshness"
)

// BenchmarkFreshness measures the share of crawler requests served stale, as a crawler sees it,
// with the real supervisor and workers under queue.policy ready and freshness side by side, in
// real time (the processes' clock is never moved), against the optimum for the same rates and
// capacity. It runs two corpora one after the other: one site (every page on one host, its
// renders capped by politeness) and several (the same pages over four hosts, 127.0.0.1–4, each
// its own site); within a corpus the two policies run at the same time, each node with its own
// origin servers on the same hidden schedule, and the same crawler requests (one seed); a
// freshness.stretch_factor of FRESHQ_BENCH_STRETCH runs as one more node beside them.
//
// The origin (freshOrigin) knows every version of every page: 30 % of the pages never change,
// the others change as a Poisson process with a mean interval drawn log-uniformly between 20 s
// and 20 min; half of the pages send an ETag and answer If-None-Match with 304; every answer,
// 200 or 304, costs the page's origin time (0.5–0.8 s, drawn per page). The body carries the
// page's version (data-bench-version), so every crawler answer says which version freshq
// served: a request is stale when the page changed at the origin after that version, which
// is the ground truth the figures read.
//
// The crawler sends about 30 requests a second (Poisson arrivals) through the crawler listener
// (GET /{full URL} with the token), pages drawn by a Zipf law over a popularity ranking that is
// random but for a fifth of the pages, whose ranks are ordered by change rate (the fastest
// changing of them the most popular). The node renders with the http renderer, one render
// worker at render.concurrency 4 (the default politeness limit of a site is 4 too), and is
// otherwise at its defaults but for a sweep every second; the pages' route has a one-minute
// interval and the corpus asks for about 2.6 times the renders the node can do (pages ÷
// interval against concurrency ÷ mean origin time), so the farm is always behind.
//
// The optimum is computed offline from the origin's schedule: the water-filling rates
// (freshness.Optimal) over the pages' true change and request rates, bounded by the route's
// min_interval, for the render rate the nodes measured in the window (the highest), and its
// expected stale share; and the same with every page rendered at least once in the longest
// interval ready left a page in the window (what freshness keeps to at stretch_factor 1; in a
// run of a few of ready's cycles that interval is cut short by the run's end, and this
// optimum is then pinned at its bound).
//
// Beside the figures each node's row has its longest interval between two origin answers to a
// page ending in the window, and its "freshness tuned" log lines (how many, and when the first
// came); freshq's renders less its 304s against the origin's full answers shows whether a page
// is ever fetched twice for one render.
//
// Sized by FRESHQ_BENCH_MINUTES (a run's length, default 6), FRESHQ_BENCH_FROM (the minute the
// figures are measured from, default 2), FRESHQ_BENCH_PAGES (default: 2.6 × the capacity's
// renders a minute), FRESHQ_BENCH_RATE (crawler requests a second, 30), FRESHQ_BENCH_SEED (1),
// FRESHQ_BENCH_HOSTS (the corpora, by their numbers of hosts: default "1 4"),
// FRESHQ_BENCH_STRETCH (freshness.stretch_factor values, each run as one more node beside the
// two at the defaults: default none).
func BenchmarkFreshness(b *testing.B) {
	minutes := benchEnvInt(b, "FRESHQ_BENCH_MINUTES", 6)
	from := benchEnvInt(b, "FRESHQ_BENCH_FROM", 2)
	if from >= minutes {
		b.Fatalf("FRESHQ_BENCH_FROM=%d must be below FRESHQ_BENCH_MINUTES=%d", from, minutes)
	}
	const concurrency, meanCost = 4, 0.65
	expected := concurrency / meanCost // renders a second the node can do, roughly
	pages := benchEnvInt(b, "FRESHQ_BENCH_PAGES", int(math.Round(2.6*expected*60)))
	rate := benchEnvInt(b, "FRESHQ_BENCH_RATE", 30)
	seed := uint64(benchEnvInt(b, "FRESHQ_BENCH_SEED", 1))
	run := freshBenchRun{
		pages: pages, rate: float64(rate), seed: seed, concurrency: concurrency,
		length: time.Duration(minutes) * time.Minute, from: time.Duration(from) * time.Minute, interval: time.Minute,
		stretch: strings.Fields(cmpEnv("FRESHQ_BENCH_STRETCH", "")),
	}
	for _, f := range strings.Fields(cmpEnv("FRESHQ_BENCH_HOSTS", "1 4")) {
		hosts, err := strconv.Atoi(f)
		if err != nil || hosts < 1 || hosts > 254 {
			b.Fatalf("FRESHQ_BENCH_HOSTS: %q is not a number of hosts", f)
		}
		run.corpus, run.hosts = fmt.Sprintf("%d sites", hosts), hosts
		if hosts == 1 {
			run.corpus = "one site"
		}
		run.measure(b)
	}
}

type freshBenchRun struct {
	corpus             string
	hosts, pages       int
	rate               float64
	seed               uint64
	concurrency        int
	length, from       time.Duration
	interval           time.Duration // the route's interval
	stretch            []string      // freshness.stretch_factor values run beside the defaults
	schedule           *freshSchedule
	requests           []freshRequest
	start              time.Time
	minIntervalSeconds float64
}

// freshSchedule is the hidden truth: every page's change times, cost and validators.
type freshSchedule struct {
	meanChange []float64   // seconds between changes; 0 = never changes
	changes    [][]float64 // change times, seconds since the start
	cost       []time.Duration
	validators []bool
	popularity []float64 // share of the crawler's requests
}

func newFreshSchedule(seed uint64, pages int, horizon time.Duration) *freshSchedule {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &freshSchedule{
		meanChange: make([]float64, pages), changes: make([][]float64, pages),
		cost: make([]time.Duration, pages), validators: make([]bool, pages), popularity: make([]float64, pages),
	}
	for i := range pages {
		s.cost[i] = time.Duration((0.5 + 0.3*rng.Float64()) * float64(time.Second))
		s.validators[i] = rng.Float64() < 0.5
		if rng.Float64() < 0.3 {
			continue
		}
		s.meanChange[i] = math.Exp(math.Log(20) + rng.Float64()*(math.Log(1200)-math.Log(20)))
		for t := rng.ExpFloat64() * s.meanChange[i]; t < horizon.Seconds(); t += rng.ExpFloat64() * s.meanChange[i] {
			s.changes[i] = append(s.changes[i], t)
		}
	}
	// Popularity: a random ranking, but a fifth of the pages take their ranks (the same set
	// of ranks) in order of change rate, the fastest changing the most popular.
	rank := rng.Perm(pages)
	chosen := rng.Perm(pages)[:pages/5]
	ranks := make([]int, len(chosen))
	for j, p := range chosen {
		ranks[j] = rank[p]
	}
	sort.Ints(ranks)
	sort.Slice(chosen, func(a, c int) bool { return changeRate(s.meanChange[chosen[a]]) > changeRate(s.meanChange[chosen[c]]) })
	for j, p := range chosen {
		rank[p] = ranks[j]
	}
	total := 0.0
	for i := range pages {
		s.popularity[i] = 1 / float64(rank[i]+1) // Zipf, exponent 1
		total += s.popularity[i]
	}
	for i := range pages {
		s.popularity[i] /= total
	}
	return s
}

func changeRate(mean float64) float64 {
	if mean == 0 {
		return 0
	}
	return 1 / mean
}

// version is page i's version at sec seconds after the start: the changes up to then.
func (s *freshSchedule) version(i int, sec float64) int {
	return sort.SearchFloat64s(s.changes[i], sec+1e-9)
}

type freshRequest struct {
	at   time.Duration
	page int
}

// newFreshRequests is the crawler's sequence: Poisson arrivals at rate a second, pages drawn
// by popularity.
func newFreshRequests(seed uint64, s *freshSchedule, rate float64, length time.Duration) []freshRequest {
	rng := rand.New(rand.NewPCG(seed, 0xc4a1))
	cum := make([]float64, len(s.popularity))
	acc := 0.0
	for i, p := range s.popularity {
		acc += p
		cum[i] = acc
	}
	var out []freshRequest
	for t := rng.ExpFloat64() / rate; t < length.Seconds(); t += rng.ExpFloat64() / rate {
		i := min(sort.SearchFloat64s(cum, rng.Float64()*acc), len(cum)-1)
		out = append(out, freshRequest{at: time.Duration(t * float64(time.Second)), page: i})
	}
	return out
}

// freshOrigin serves one node's pages, on one server per host, and counts what it answered.
type freshOrigin struct {
	s       *freshSchedule
	servers []*httptest.Server
	start   atomic.Pointer[time.Time]
	full    []atomic.Int64 // 200s per page
	checks  []atomic.Int64 // 304s per page
	// the same counts at the start of the window
	fullFrom, checksFrom []int64
	// per page: the last answer's time (ns since the start, 0 = none yet) and the longest time
	// between two answers ending in the window
	mu      sync.Mutex
	last    []int64
	longest []time.Duration
	from    time.Duration
}

func newFreshOrigin(b *testing.B, s *freshSchedule, hosts int) *freshOrigin {
	o := &freshOrigin{s: s, full: make([]atomic.Int64, len(s.cost)), checks: make([]atomic.Int64, len(s.cost)),
		last: make([]int64, len(s.cost)), longest: make([]time.Duration, len(s.cost))}
	for h := range hosts {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", h+1))
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(o.serve))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		b.Cleanup(srv.Close)
		o.servers = append(o.servers, srv)
	}
	return o
}

func (o *freshOrigin) url(i int) string {
	return fmt.Sprintf("%s/c/p%d", o.servers[i%len(o.servers)].URL, i)
}

func (o *freshOrigin) serve(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/c/p"))
	if err != nil || i < 0 || i >= len(o.s.cost) {
		http.NotFound(w, r)
		return
	}
	select { // the page's origin time, for a 304 as for a 200
	case <-time.After(o.s.cost[i]):
	case <-r.Context().Done():
		return
	}
	start := o.start.Load()
	if start == nil {
		http.Error(w, "not started", http.StatusServiceUnavailable)
		return
	}
	since := time.Since(*start)
	v := o.s.version(i, since.Seconds())
	o.mu.Lock()
	if prev := o.last[i]; prev > 0 && since >= o.from {
		o.longest[i] = max(o.longest[i], since-time.Duration(prev))
	}
	o.last[i] = int64(since)
	o.mu.Unlock()
	if o.s.validators[i] {
		etag := fmt.Sprintf(`"p%d-v%d"`, i, v)
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			o.checks[i].Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	o.full[i].Add(1)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><html><head><title>Page %d</title></head><body><h1>Page %d</h1>"+
		"<p data-bench-version=\"%d\">Content version %d of page %d.</p><p>%s</p></body></html>",
		i, i, v, v, i, strings.Repeat("Lorem ipsum dolor sit amet. ", 20))
}

func (o *freshOrigin) markWindow() {
	o.fullFrom, o.checksFrom = make([]int64, len(o.full)), make([]int64, len(o.full))
	for i := range o.full {
		o.fullFrom[i], o.checksFrom[i] = o.full[i].Load(), o.checks[i].Load()
	}
}

// freshPolicyRun is one node's run and what it measured.
type freshPolicyRun struct {
	policy string
	node   *node
	serve  string
	origin *freshOrigin
	// per request of the window: 1 stale, 0 fresh, -1 not served with a version
	mu                  sync.Mutex
	stale, fresh, other int // in the window
	staleAll, freshAll  int // since the start
	reported            wire0
	metrics             map[string]float64
}

// wire0 is /v1/queue's freshness section.
type wire0 struct {
	ServedRequests float64 `json:"served_requests"`
	StaleRequests  float64 `json:"stale_requests"`
	StaleShare     float64 `json:"stale_share"`
	// the last 15 minutes (absent before freshq kept a window)
	WindowServed     float64 `json:"window_served_requests"`
	WindowStaleShare float64 `json:"window_stale_share"`
}

var benchVersion = regexp.MustCompile(`data-bench-version="(\d+)"`)

func (run *freshBenchRun) measure(b *testing.B) {
	run.schedule = newFreshSchedule(run.seed, run.pages, run.length+time.Minute)
	run.requests = newFreshRequests(run.seed, run.schedule, run.rate, run.length)
	run.minIntervalSeconds = run.interval.Seconds() / config.MinIntervalDivisor
	domains := make([]string, run.hosts)
	for h := range domains {
		domains[h] = fmt.Sprintf("%q", fmt.Sprintf("127.0.0.%d", h+1))
	}
	var runs []*freshPolicyRun
	type variant struct{ name, policy, extra string }
	variants := []variant{{"ready", "ready", ""}, {"freshness", "freshness", ""}}
	for _, f := range run.stretch {
		variants = append(variants, variant{"freshness, stretch_factor " + f, "freshness", "freshness: {stretch_factor: " + f + "}\n"})
	}
	for _, v := range variants {
		pr := &freshPolicyRun{policy: v.name, serve: freePort(b), origin: newFreshOrigin(b, run.schedule, run.hosts)}
		yaml := fmt.Sprintf(`queue: {policy: %s, ready: {sweep_interval: 1s}}
supervisor: {shutdown_timeout: 3s}
render:
  renderer: http
  timeout: 20s
  concurrency: %d
  domains: [%s]
serve:
  listen: %s
  tokens: [crawl-token]
  wait: 20s
%s`, v.policy, run.concurrency, strings.Join(domains, ", "), pr.serve, v.extra)
		pr.node = startNodeEvery(b, b.TempDir(), 2, run.interval, yaml, "")
		runs = append(runs, pr)
	}
	for _, pr := range runs {
		waitFor(b, pr.policy+" ready", 60*time.Second, pr.node.ready)
	}
	run.crawl(b, runs, func() {
		for _, pr := range runs {
			pr.origin.markWindow()
		}
	})
	for _, pr := range runs {
		pr.metrics = pr.node.metrics()
		resp, err := http.Get("http://" + pr.node.addr + "/v1/queue")
		if err == nil {
			var q struct {
				Freshness wire0 `json:"freshness"`
			}
			json.NewDecoder(resp.Body).Decode(&q)
			resp.Body.Close()
			pr.reported = q.Freshness
		}
	}
	run.report(runs)
}

// crawl starts the run's clock, posts every page of the corpus to each node in runs, then sends
// the crawler's requests to every node at their arrival times, the same requests to each, and
// waits for their answers; window is called once, when the measured window begins (run.from).
func (run *freshBenchRun) crawl(b *testing.B, runs []*freshPolicyRun, window func()) {
	run.start = time.Now()
	for _, pr := range runs {
		pr.origin.from = run.from
		pr.origin.start.Store(&run.start)
		var body bytes.Buffer
		for i := range run.pages {
			json.NewEncoder(&body).Encode(map[string]string{"url": pr.origin.url(i)})
		}
		resp, err := http.Post("http://"+pr.node.addr+"/v1/targets", "application/x-ndjson", &body)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("POST /v1/targets: %d %s", resp.StatusCode, out)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	marked := false
	for _, rq := range run.requests {
		if d := time.Until(run.start.Add(rq.at)); d > 0 {
			time.Sleep(d) // the crawler's own arrival times: this is a real-time benchmark
		}
		if !marked && rq.at >= run.from {
			marked = true
			window()
		}
		for _, pr := range runs {
			sem <- struct{}{}
			wg.Add(1)
			go func(pr *freshPolicyRun, rq freshRequest) {
				defer func() { <-sem; wg.Done() }()
				pr.crawlOne(client, run, rq)
			}(pr, rq)
		}
	}
	wg.Wait()
}

// crawlOne sends one request and judges the version it got against the origin's at the time.
func (pr *freshPolicyRun) crawlOne(client *http.Client, run *freshBenchRun, rq freshRequest) {
	req, err := http.NewRequest(http.MethodGet, "http://"+pr.serve, nil)
	if err != nil {
		return
	}
	req.URL.Opaque = "/" + pr.origin.url(rq.page)
	req.Header.Set("X-Prerender-Token", "crawl-token")
	req.Header.Set("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
	verdict := -1
	resp, err := client.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		now := time.Since(run.start).Seconds()
		if m := benchVersion.FindSubmatch(body); resp.StatusCode == http.StatusOK && m != nil {
			served, _ := strconv.Atoi(string(m[1]))
			verdict = 0
			if run.schedule.version(rq.page, now) > served {
				verdict = 1
			}
		}
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	switch verdict {
	case 1:
		pr.staleAll++
	case 0:
		pr.freshAll++
	}
	if rq.at < run.from {
		return
	}
	switch verdict {
	case 1:
		pr.stale++
	case 0:
		pr.fresh++
	default:
		pr.other++
	}
}

// tunings counts the node's "freshness tuned" log lines and says when the first came.
func (pr *freshPolicyRun) tunings(start time.Time) (int, string) {
	n, first := 0, "-"
	for _, line := range strings.Split(pr.node.log.String(), "\n") {
		if !strings.Contains(line, `"freshness tuned"`) {
			continue
		}
		n++
		if n > 1 {
			continue
		}
		var l struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && !l.Time.IsZero() {
			first = fmt.Sprintf("%.0f s", l.Time.Sub(start).Seconds())
		}
	}
	return n, first
}

func share(stale, fresh int) float64 {
	if stale+fresh == 0 {
		return math.NaN()
	}
	return float64(stale) / float64(stale+fresh)
}

func (run *freshBenchRun) report(runs []*freshPolicyRun) {
	s := run.schedule
	window := (run.length - run.from).Seconds()
	still := 0
	for i := range s.meanChange {
		if s.meanChange[i] == 0 {
			still++
		}
	}
	capacity := 0.0 // origin answers a second in the window, the higher of the two nodes
	type counts struct{ full, checks, fullWin, checksWin, stillWin int64 }
	cs := make([]counts, len(runs))
	for k, pr := range runs {
		for i := range s.cost {
			f, c := pr.origin.full[i].Load(), pr.origin.checks[i].Load()
			cs[k].full += f
			cs[k].checks += c
			cs[k].fullWin += f - pr.origin.fullFrom[i]
			cs[k].checksWin += c - pr.origin.checksFrom[i]
			if s.meanChange[i] == 0 {
				cs[k].stillWin += f - pr.origin.fullFrom[i] + c - pr.origin.checksFrom[i]
			}
		}
		capacity = max(capacity, float64(cs[k].fullWin+cs[k].checksWin)/window)
	}
	// The optimum: water-filling over the true rates for that capacity, within min_interval.
	opt := make([]freshness.Page, len(s.cost))
	muTotal := 0.0
	for i := range opt {
		opt[i] = freshness.Page{Lambda: 3600 * changeRate(s.meanChange[i]), Mu: 3600 * run.rate * s.popularity[i],
			MaxPerHour: 3600 / run.minIntervalSeconds}
		muTotal += opt[i].Mu
	}
	plan := freshness.Optimal(opt, capacity*3600)
	// The optimum within ready's longest interval (the ceiling freshq keeps to): every page
	// rendered at least once in the longest interval ready left a page in the window.
	var readyLongest time.Duration
	longest := make([]time.Duration, len(runs))
	for k, pr := range runs {
		pr.origin.mu.Lock()
		for _, d := range pr.origin.longest {
			longest[k] = max(longest[k], d)
		}
		pr.origin.mu.Unlock()
		if pr.policy == "ready" {
			readyLongest = longest[k]
		}
	}
	bounded := slices.Clone(opt)
	if readyLongest > 0 {
		for i := range bounded {
			bounded[i].MinPerHour = 3600 / readyLongest.Seconds()
		}
	}
	boundedPlan := freshness.Optimal(bounded, capacity*3600)
	optStale, optStill := 0.0, 0.0
	for i, p := range opt {
		optStale += p.Mu * freshness.StaleShare(p.Lambda, plan.PerHour[i])
		if p.Lambda == 0 {
			optStill += plan.PerHour[i]
		}
	}
	optShare := optStale / muTotal
	boundedStale := 0.0
	for i, p := range bounded {
		boundedStale += p.Mu * freshness.StaleShare(p.Lambda, boundedPlan.PerHour[i])
	}
	fmt.Printf("\n%s: %d hosts, %d pages (%d never change), route interval %s, demand %.1f renders/s against %.2f measured (%.1f×), crawler %.0f requests/s, runs of %s measured from minute %d, seed %d\n",
		run.corpus, run.hosts, run.pages, still, run.interval, float64(run.pages)/run.interval.Seconds(), capacity,
		float64(run.pages)/run.interval.Seconds()/capacity, run.rate, run.length, int(run.from.Minutes()), run.seed)
	fmt.Println("| policy | stale share (truth, window) | truth since start | freshq reported (since start; last 15 min) | requests in window (not served) | origin answers in window (304) | renders/s | to never-changing pages | freshq renders (304) | origin full answers, whole run | longest interval | freshness tunings (first at) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	shares := map[string]float64{}
	for k, pr := range runs {
		shares[pr.policy] = share(pr.stale, pr.fresh)
		renders := 0.0
		for name, v := range pr.metrics {
			if strings.HasPrefix(name, "freshq_render_total{") {
				renders += v
			}
		}
		notModified := pr.metrics[`freshq_render_conditional_total{result="not_modified"}`]
		tunings, first := pr.tunings(run.start)
		fmt.Printf("| %s | %.1f %% | %.1f %% | %.1f %% of %.0f; %.1f %% of %.0f | %d (%d) | %d (%d) | %.2f | %d | %.0f (%.0f) | %d | %.0f s | %d (%s) |\n",
			pr.policy, 100*shares[pr.policy], 100*share(pr.staleAll, pr.freshAll), 100*pr.reported.StaleShare, pr.reported.ServedRequests, 100*pr.reported.WindowStaleShare, pr.reported.WindowServed,
			pr.stale+pr.fresh+pr.other, pr.other, cs[k].fullWin+cs[k].checksWin, cs[k].checksWin,
			float64(cs[k].fullWin+cs[k].checksWin)/window, cs[k].stillWin, renders, notModified, cs[k].full, longest[k].Seconds(), tunings, first)
	}
	fmt.Printf("| optimum | %.1f %% (expected) | | | | %.0f | %.2f | %.0f | | | | |\n", 100*optShare, capacity*window, capacity, optStill*window/3600)
	fmt.Printf("| optimum within ready's longest interval | %.1f %% (expected) | | | | %.0f | %.2f | | | | %.0f s | |\n", 100*boundedStale/muTotal, capacity*window, capacity, readyLongest.Seconds())
	fmt.Printf("%s: stale share ready %.1f %% freshness %.1f %% optimum %.1f %% (freshness/ready %.2f, freshness/optimum %.2f)\n",
		run.corpus, 100*shares["ready"], 100*shares["freshness"], 100*optShare, shares["freshness"]/shares["ready"], shares["freshness"]/optShare)
	for _, f := range run.stretch {
		sh := shares["freshness, stretch_factor "+f]
		fmt.Printf("%s: stale share freshness with stretch_factor %s %.1f %% (/ready %.2f, /optimum %.2f)\n", run.corpus, f, 100*sh, sh/shares["ready"], sh/optShare)
	}
}
