package apply

import (
	"math"
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/freshness"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// crossing finds the first millisecond at which the marginal value reaches the threshold.
func TestCrossing(t *testing.T) {
	for _, c := range []struct{ lambda, mu, nu float64 }{{1, 10, 1}, {0.1, 2, 0.5}, {24, 100, 3}, {0.01, 0.5, 0.2}} {
		max := int64(48 * hour)
		tau := freshness.Crossing(c.lambda, c.mu, c.nu, max)
		if tau == 0 {
			t.Fatalf("%+v: no crossing within 48 h", c)
		}
		if h := freshness.Marginal(c.lambda, c.mu, tau); h < c.nu {
			t.Fatalf("%+v: h(%d) = %v below ν", c, tau, h)
		}
		if h := freshness.Marginal(c.lambda, c.mu, tau-1); h >= c.nu {
			t.Fatalf("%+v: h(%d) = %v already at ν", c, tau-1, h)
		}
	}
	// μ/λ below ν: never worth a render before the ceiling.
	if tau := freshness.Crossing(1, 0.5, 1, 48*hour); tau != 0 {
		t.Fatalf("μ/λ < ν crossed at %d", tau)
	}
}

const freshYAML = `
queue: {policy: freshness}
freshness: {threshold: 1, prior_weight: 2}
routes:
  - {name: news, match: prefix, path: /news/, interval: 24h, min_interval: 30m, change_interval: 1h, requests: 60}
  - {name: archive, match: prefix, path: /archive/, interval: 24h, change_interval: 720h, requests: 0.01}
`

// lead is how long before its ceiling a page not worth its render is due: the default
// queue.ready.sweep_interval (freshness.DueAfter).
var lead = config.Default().Queue.Ready.SweepInterval.Ms()

// Under queue.policy freshness a rendered page is due once a render would prevent
// freshness.threshold stale serves, within its route's bounds: a page that changes hourly and
// is asked for every minute is due at its min_interval, a page asked for once in days is due a
// sweep interval before its interval (the ceiling), so that the last sweep before it publishes
// it. Each is filed with its rank interval: threshold ÷ the marginal value's growth for the
// first, the route's interval (its ceiling, unstretched) for the second; under ready none (0: the
// cadence).
func TestApplyFreshnessDue(t *testing.T) {
	newsLambda := freshness.History{}.Rate(freshness.Prior{RatePerHour: 1, Weight: 2, IntervalMs: hour})
	for _, c := range []struct {
		yaml, key string
		want      int64
		rank      int64
	}{
		{freshYAML, "desktop|https://a.test/news/1", 30 * 60_000, int64(1 / freshness.Slope(newsLambda, 60, 30*60_000) * float64(hour))},
		{freshYAML, "desktop|https://a.test/archive/1", 24*hour - lead, 24 * hour},
		{"queue: {policy: ready}\nroutes: [{name: news, match: prefix, path: /news/, interval: 24h, requests: 60}]", "desktop|https://a.test/news/1", 24 * hour, 0},
	} {
		e := qtest.New(t, c.yaml, start, shm.Options{})
		key := []byte(c.key)
		e.Put(c.key, start-hour, false, 0, store.Lanes{})
		a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
		if st, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("x"), Lease: grant(t, e, key)}}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		row, err := e.Store.GetSchedule(key)
		if err != nil {
			t.Fatal(err)
		}
		if got := row.DueAtMs - start; got != c.want {
			t.Errorf("%s under %q: due %d ms after the render, want %d", c.key, c.yaml[:20], got, c.want)
		}
		if abs64(row.RankIntervalMs-c.rank) > 1 {
			t.Errorf("%s under %q: rank interval %d ms, want %d", c.key, c.yaml[:20], row.RankIntervalMs, c.rank)
		}
		if row.EffectiveIntervalMs != 24*hour {
			t.Errorf("%s: the row's cadence became %d: the cadence is the route's", c.key, row.EffectiveIntervalMs)
		}
	}
}

// Between the bounds the due time is the crossing itself, and a page newly asked for more is
// brought forward by the demand flush, never pushed back.
func TestFreshnessDueFollowsDemand(t *testing.T) {
	e := qtest.New(t, `
queue: {policy: freshness}
routes:
  - {name: p, match: prefix, path: /p/, interval: 48h, change_interval: 6h, requests: 0.2}
`, start, shm.Options{})
	key := []byte("desktop|https://a.test/p/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	if _, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("x"), Lease: grant(t, e, key)}}); err != nil {
		t.Fatal(err)
	}
	row, _ := e.Store.GetSchedule(key)
	lambda := 1.0 / 6
	want := freshness.Crossing(lambda, 0.2, 1, 48*hour)
	if got := row.DueAtMs - start; want == 0 || abs64(got-want) > 60_000 {
		t.Fatalf("due %d after the render, want the crossing %d (λ %v, μ 0.2)", got, want, lambda)
	}
	e.Advance(hour)
	d := mustDemand(t, intake.DemandDeps{Store: e.Store, Writer: e.Store, Locks: &intake.KeyLocks{}, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	if _, _, err := d.Write(map[string]uint32{string(key): 500}); err != nil {
		t.Fatal(err)
	}
	after, _ := e.Store.GetSchedule(key)
	if after.DueAtMs >= row.DueAtMs {
		t.Fatalf("500 requests did not bring the page forward: due %d, was %d", after.DueAtMs, row.DueAtMs)
	}
	if after.DueAtMs < e.Now() {
		t.Fatalf("due %d before now %d", after.DueAtMs, e.Now())
	}
	// Asked for more, its value grows faster past the threshold: it ranks ahead sooner.
	if after.RankIntervalMs <= 0 || after.RankIntervalMs >= row.RankIntervalMs {
		t.Fatalf("rank interval %d after 500 requests, was %d: want a shorter one", after.RankIntervalMs, row.RankIntervalMs)
	}
	if _, _, err := d.Write(map[string]uint32{string(key): 0}); err != nil {
		t.Fatal(err)
	}
	again, _ := e.Store.GetSchedule(key)
	if again.DueAtMs > after.DueAtMs {
		t.Fatalf("a flush pushed the due time back: %d → %d", after.DueAtMs, again.DueAtMs)
	}
	if again.DueAtMs == after.DueAtMs && again.RankIntervalMs != after.RankIntervalMs {
		t.Fatalf("a flush that kept the due time changed its rank interval: %d → %d", after.RankIntervalMs, again.RankIntervalMs)
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// With worker 0's tuning (capacity-following: capacity.TuneFreshness) the Applier files with
// the tuned threshold and the route's stretched ceiling instead of freshness.threshold and the
// interval: a page not worth its render waits for the stretched ceiling (the archive, at 3× its
// interval, less a sweep interval), a page worth it is due at the tuned threshold's crossing; a route the tuning
// does not name keeps its interval. The row's cadence is unchanged either way (its class
// too). A row filed at its ceiling ranks by the route's interval however far the tuning
// stretched the ceiling: stretched, it would wait past the ceiling behind the rows ranked by
// value (rank 0 below: a crossing, whose rank interval TestApplyFreshnessDue checks).
func TestApplyFreshnessDueTuned(t *testing.T) {
	for _, c := range []struct {
		key  string
		tu   freshness.Tuning
		want func() int64
		rank int64
	}{
		{"desktop|https://a.test/archive/1", freshness.Tuning{Nu: 1, Stretch: map[string]float64{"archive": 3}},
			func() int64 { return 72*hour - lead }, 24 * hour},
		{"desktop|https://a.test/archive/1", freshness.Tuning{Nu: 1, Stretch: map[string]float64{"news": 3}},
			func() int64 { return 24*hour - lead }, 24 * hour},
		{"desktop|https://a.test/news/1", freshness.Tuning{Nu: 40, Stretch: map[string]float64{"news": 2}},
			func() int64 {
				// λ from the prior (change_interval 1h, two pseudo-renders), μ the route's 60/h.
				lambda := freshness.History{}.Rate(freshness.Prior{RatePerHour: 1, Weight: 2, IntervalMs: hour})
				return freshness.Crossing(lambda, 60, 40, 48*hour)
			}, 0},
	} {
		e := qtest.New(t, freshYAML, start, shm.Options{})
		key := []byte(c.key)
		e.Put(c.key, start-hour, false, 0, store.Lanes{})
		cell := &freshness.TuningCell{}
		cell.Store(&c.tu)
		a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Tuning: cell})
		if st, err := a.Apply([]wire.Result{{Key: key, Outcome: "ok", Status: 200, Body: []byte("x"), Lease: grant(t, e, key)}}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		row, err := e.Store.GetSchedule(key)
		if err != nil {
			t.Fatal(err)
		}
		want := c.want()
		if got := row.DueAtMs - start; want <= 30*60_000 || got != want {
			t.Errorf("%s with %+v: due %d ms after the render, want %d", c.key, c.tu, got, want)
		}
		if row.EffectiveIntervalMs != 24*hour {
			t.Errorf("%s: the row's cadence became %d: the cadence is the route's", c.key, row.EffectiveIntervalMs)
		}
		if c.rank != 0 && row.RankIntervalMs != c.rank {
			t.Errorf("%s with %+v: filed at its ceiling with rank interval %d ms, want the route's interval %d", c.key, c.tu, row.RankIntervalMs, c.rank)
		}
	}
}

// A rank interval belongs to the decision that filed its due time: a write that only re-files
// that due time (a wait, a re-submission without a due time) keeps it; a write that files a
// due time of its own (a rush) files none, and the row ranks by its cadence.
func TestRefilingKeepsTheRankInterval(t *testing.T) {
	e := qtest.New(t, freshYAML, start, shm.Options{})
	tg := mustTargets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
	const key = "desktop|https://a.test/news/1"
	sch, err := store.NewSchedule([]byte(key), start+hour, false, 24*hour, store.Lanes{})
	if err == nil {
		sch, err = sch.WithRankInterval(3 * hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &store.Target{URL: "https://a.test/news/1", Device: "desktop", Source: store.SourceAPI}}}); err != nil {
		t.Fatal(err)
	}
	rank := func(step string) int64 {
		t.Helper()
		row, err := e.Store.GetSchedule([]byte(key))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return row.RankIntervalMs
	}
	if _, err := tg.Prioritize(wire.PrioritizeRequest{Prefix: "https://a.test/news/", Mode: "wait"}); err != nil {
		t.Fatal(err)
	}
	if r := rank("wait"); r != 3*hour {
		t.Fatalf("a wait re-filed the due time with rank interval %d, want %d", r, 3*hour)
	}
	if n := upsert(t, tg, wire.TargetItem{URL: "https://a.test/news/1"}); n != 1 {
		t.Fatalf("re-submission: %d landed", n)
	}
	if r := rank("re-submission"); r != 3*hour {
		t.Fatalf("a re-submission without a due time re-filed it with rank interval %d, want %d", r, 3*hour)
	}
	if _, err := tg.Prioritize(wire.PrioritizeRequest{Prefix: "https://a.test/news/", Mode: "rush"}); err != nil {
		t.Fatal(err)
	}
	if r := rank("rush"); r != 0 {
		t.Fatalf("a rush filed its own due time with the old rank interval %d, want none", r)
	}
}

// A page's change-rate prior is its route's change_interval when the route sets one; else the
// rate worker 0's tuning pooled from the route's pages (0 when they never changed); else one
// change a cadence. A page with no render of its own is estimated at its prior exactly.
func TestChangePriorIsTheRoutesPooledRate(t *testing.T) {
	const yaml = `
queue: {policy: freshness}
routes:
  - {name: shop, match: prefix, path: /shop/, interval: 24h}
  - {name: archive, match: prefix, path: /archive/, interval: 24h, change_interval: 720h}
`
	e := qtest.New(t, yaml, start, shm.Options{})
	set := qtest.Settings(e, IntakeSettingsOf)()
	pooled := &freshness.Tuning{Nu: 1, RouteRate: map[string]float64{"shop": 0.25, "archive": 5}}
	never := &freshness.Tuning{Nu: 1, RouteRate: map[string]float64{"shop": 0}}
	for _, c := range []struct {
		key  string
		tu   *freshness.Tuning
		want float64
	}{
		{"desktop|https://a.test/shop/1", nil, 1.0 / 24},
		{"desktop|https://a.test/shop/1", pooled, 0.25},
		{"desktop|https://a.test/shop/1", never, 0},
		{"desktop|https://a.test/archive/1", pooled, 1.0 / 720},
		{"desktop|https://a.test/shop/1", &freshness.Tuning{Nu: 1, RouteRate: map[string]float64{"archive": 5}}, 1.0 / 24},
	} {
		p := intake.FreshPartsOf(set, c.tu, set.Resolve([]byte(c.key)), 24*hour, &store.Freshness{}, start)
		if math.Abs(p.ChangesPerHour-c.want) > 1e-9*max(c.want, 1) {
			t.Errorf("%s under %+v: %v changes an hour, want %v", c.key, c.tu, p.ChangesPerHour, c.want)
		}
	}
}

// A row's ceiling stretches its route's interval, not its own cadence (a demand rung's,
// shorter for a page in demand): without a tuning the ceiling is the interval, with one the
// interval times the route's stretch. A key no route matches stretches its cadence.
func TestCeilingIsTheRoutesInterval(t *testing.T) {
	const yaml = `
queue: {policy: freshness}
routes:
  - {name: shop, match: prefix, path: /shop/, interval: 24h}
`
	e := qtest.New(t, yaml, start, shm.Options{})
	set := qtest.Settings(e, IntakeSettingsOf)()
	tu := &freshness.Tuning{Nu: 1, Stretch: map[string]float64{"shop": 1.5, "": 2}}
	for _, c := range []struct {
		key       string
		cadenceMs int64
		tu        *freshness.Tuning
		want      int64
	}{
		{"desktop|https://a.test/shop/1", 6 * hour, nil, 24 * hour},
		{"desktop|https://a.test/shop/1", 6 * hour, tu, 36 * hour},
		{"desktop|https://a.test/shop/1", 24 * hour, tu, 36 * hour},
		{"desktop|https://a.test/other/1", 6 * hour, nil, 6 * hour},
		{"desktop|https://a.test/other/1", 6 * hour, tu, 12 * hour},
	} {
		p := intake.FreshPartsOf(set, c.tu, set.Resolve([]byte(c.key)), c.cadenceMs, &store.Freshness{}, start)
		if p.MaxIntervalMs != c.want {
			t.Errorf("%s at cadence %d h, tuning %v: ceiling %d ms, want %d", c.key, c.cadenceMs/hour, c.tu != nil, p.MaxIntervalMs, c.want)
		}
		if p.MinIntervalMs != c.cadenceMs/16 {
			t.Errorf("%s at cadence %d h: floor %d ms, want the cadence ÷ 16", c.key, c.cadenceMs/hour, p.MinIntervalMs)
		}
	}
}

// Under queue.policy freshness a transient failure of a page rendered before is filed with
// its backoff (the policy's) and freshness.RetryRankMs as its rank interval, so that it is
// published at the first sweep after the backoff rather than waiting for a grant a second
// time; a never-rendered page's failure, and any failure under ready, file none (the cadence).
func TestRetryRanksAheadUnderFreshness(t *testing.T) {
	for _, c := range []struct {
		yaml  string
		never bool
		want  int64
	}{
		{freshYAML, false, freshness.RetryRankMs},
		{freshYAML, true, 0},
		{"queue: {policy: ready}\nroutes: [{name: news, match: prefix, path: /news/, interval: 24h}]", false, 0},
	} {
		e := qtest.New(t, c.yaml, start, shm.Options{})
		const key = "desktop|https://a.test/news/1"
		e.Put(key, start-hour, false, 0, store.Lanes{NeverRendered: c.never})
		a := newApplier(t, ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now})
		if st, err := a.Apply([]wire.Result{{Key: []byte(key), Outcome: "error", Status: 503, Lease: grant(t, e, []byte(key))}}); err != nil || st.Applied != 1 {
			t.Fatalf("apply: %+v %v", st, err)
		}
		row, err := e.Store.GetSchedule([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if !row.Failing || row.DueAtMs <= start || row.DueAtMs > start+hour {
			t.Fatalf("%q never %v: failing %v, due %d ms after the attempt: want the backoff", c.yaml[:20], c.never, row.Failing, row.DueAtMs-start)
		}
		if row.RankIntervalMs != c.want {
			t.Errorf("%q never %v: the retry's rank interval %d, want %d", c.yaml[:20], c.never, row.RankIntervalMs, c.want)
		}
	}
}
