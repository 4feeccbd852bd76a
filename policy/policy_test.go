package policy

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/store"
)

const (
	hour = int64(time.Hour / time.Millisecond)
	now  = int64(1_800_000_000_000)
)

func testPolicy(t testing.TB) *Policy {
	t.Helper()
	c, err := config.Parse([]byte(`
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 24h, swr: 6h}
  - {name: product, match: contains, path: /p/, interval: 48h}
  - {name: blog, match: prefix, path: /blog/}
render:
  default_interval: 24h
`))
	if err != nil {
		t.Fatal(err)
	}
	return newFromConfig(t, c)
}

func TestURLPath(t *testing.T) {
	for key, want := range map[string]string{
		"desktop|https://a.test/":            "/",
		"desktop|https://a.test":             "/",
		"mobile|https://a.test/c/x?p=1#frag": "/c/x",
		"desktop|http://a.test/p/9#x":        "/p/9",
		"https://a.test/no-device":           "/no-device",
		"desktop|/relative?x":                "/relative",
		"":                                   "/",
	} {
		if got := string(URLPath([]byte(key))); got != want {
			t.Errorf("URLPath(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestCadenceResolution(t *testing.T) {
	p := testPolicy(t)
	for _, tc := range []struct {
		name           string
		key            string
		carried, store int64
		want           int64
		origin         Origin
	}{
		{"carried wins", "desktop|https://a.test/x", 6 * hour, 12 * hour, 6 * hour, OriginRow},
		{"carried clamped to route ceiling", "desktop|https://a.test/c/shoes", 48 * hour, 0, 24 * hour, OriginRow},
		{"carried below ceiling kept", "desktop|https://a.test/c/shoes", 6 * hour, 0, 6 * hour, OriginRow},
		{"absent: route", "desktop|https://a.test/", 0, 12 * hour, 1 * hour, OriginRoute},
		{"absent, route without interval: target", "desktop|https://a.test/blog/1", 0, 12 * hour, 12 * hour, OriginTarget},
		{"absent, no route: target", "desktop|https://a.test/x", 0, 3 * hour, 3 * hour, OriginTarget},
		{"absent everywhere: default", "desktop|https://a.test/x", 0, 0, 24 * hour, OriginDefault},
		{"negative carried resolves", "desktop|https://a.test/p/1", -5, 0, 48 * hour, OriginRoute},
		{"tiny carried resolves", "desktop|https://a.test/x", 1, 0, 24 * hour, OriginDefault},
		{"absurd carried resolves", "desktop|https://a.test/x", math.MaxInt64, 0, 24 * hour, OriginDefault},
		{"unusable stored falls through", "desktop|https://a.test/x", 0, -1, 24 * hour, OriginDefault},
	} {
		r := Row{Key: []byte(tc.key), Row: store.Row{Projection: store.Projection{EffectiveIntervalMs: tc.carried, StoredIntervalMs: tc.store}}}
		got, origin := p.Cadence(&r)
		if got != tc.want || origin != tc.origin {
			t.Errorf("%s: cadence %v (%v), want %v (%v)", tc.name, time.Duration(got)*time.Millisecond, origin,
				time.Duration(tc.want)*time.Millisecond, tc.origin)
		}
		if origin.Carried() != (tc.origin == OriginRow) {
			t.Errorf("%s: Carried() wrong", tc.name)
		}
	}
}

// The ladder gap: a catalog row on a 6 h rung under a 24 h route ceiling, 6 h late, scores 1.0
// (× the sitemap boost): its own cadence, not the route's 24 h (which would give 0.25).
func TestLadderGapScoresAgainstTheRung(t *testing.T) {
	p := testPolicy(t)
	r := Row{Key: []byte("desktop|https://a.test/c/shoes"), Row: store.Row{DueAtMs: now - 6*hour, Projection: store.Projection{EffectiveIntervalMs: 6 * hour, Submitted: true}}}
	cad, _ := p.Cadence(&r)
	if got := p.Score(&r, cad, now); got != 1.0*p.Boost() {
		t.Fatalf("score %v, want %v", got, p.Boost())
	}
	r.Submitted = false
	if got := p.Score(&r, cad, now); got != 1.0 {
		t.Fatalf("discovered score %v, want 1.0", got)
	}
}

// The production symptom, at the policy level: a 1 h homepage two cadences late outranks 48 h
// product pages that are three days older.
func TestHomepageOutranksOlderProducts(t *testing.T) {
	p := testPolicy(t)
	home := Row{Key: []byte("desktop|https://a.test/"), Row: store.Row{DueAtMs: now - 2*hour, Projection: store.Projection{EffectiveIntervalMs: hour, Submitted: true}}}
	prod := Row{Key: []byte("desktop|https://a.test/p/1"), Row: store.Row{DueAtMs: now - 2*hour - 72*hour, Projection: store.Projection{EffectiveIntervalMs: 48 * hour, Submitted: true}}}
	hc, _ := p.Cadence(&home)
	pc, _ := p.Cadence(&prod)
	if hs, ps := p.Score(&home, hc, now), p.Score(&prod, pc, now); hs <= ps {
		t.Fatalf("home %v does not outrank product %v", hs, ps)
	}
}

// A row filed with a rank interval (queue.policy freshness) is ranked by lateness ÷ that
// interval, not ÷ its cadence, and not clamped to its route's interval nor to MinCadence as the
// cadence is (a rank interval of 30 s ranks by it); a row without one ranks by its cadence.
func TestRankIntervalReplacesCadenceInTheScore(t *testing.T) {
	p := testPolicy(t)
	prod := func(rankMs int64) Row {
		return Row{Key: []byte("desktop|https://a.test/p/1"), Row: store.Row{DueAtMs: now - 2*hour,
			Projection: store.Projection{EffectiveIntervalMs: 48 * hour, RankIntervalMs: rankMs}}}
	}
	for _, c := range []struct {
		rankMs, want int64
	}{{0, 48 * hour}, {hour / 2, hour / 2}, {200 * hour, 200 * hour}, {30_000, 30_000}, {1, MinRankInterval.Milliseconds()}} {
		r := prod(c.rankMs)
		cad, _ := p.Cadence(&r)
		got := p.RankInterval(&r, cad)
		if got != c.want {
			t.Errorf("rank interval %d ms: RankInterval %d, want %d", c.rankMs, got, c.want)
		}
		if s, want := p.Score(&r, got, now), float64(2*hour)/float64(c.want); math.Abs(s-want) > 1e-12 {
			t.Errorf("rank interval %d ms: score %v, want lateness ÷ %d = %v", c.rankMs, s, c.want, want)
		}
	}
}

func TestScoreEdges(t *testing.T) {
	p := testPolicy(t)
	for _, due := range []int64{0, -1, math.MinInt64, MaxDueMs, math.MaxInt64, now, now + 1} {
		r := Row{Key: []byte("desktop|https://a.test/x"), Row: store.Row{DueAtMs: due, Projection: store.Projection{Submitted: true}}}
		if s := p.Score(&r, hour, now); s != 0 {
			t.Errorf("due %d scores %v, want 0", due, s)
		}
	}
	// Any inputs at all: finite and non-negative.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		r := Row{Key: []byte("desktop|https://a.test/x"), Row: store.Row{DueAtMs: int64(rng.Uint64()), Projection: store.Projection{EffectiveIntervalMs: int64(rng.Uint64()), StoredIntervalMs: int64(rng.Uint64()), Submitted: rng.IntN(2) == 0}}}
		cad, _ := p.Cadence(&r)
		s := p.Score(&r, cad, int64(rng.Uint64()))
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			t.Fatalf("row %+v scores %v", r, s)
		}
		// Score clamps a cadence passed in directly too.
		if s := p.Score(&r, int64(rng.Uint64())-math.MaxInt64/2, now); math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			t.Fatalf("row %+v with a raw cadence scores %v", r, s)
		}
	}
}

func TestLaneOf(t *testing.T) {
	for _, tc := range []struct {
		r    Row
		want Lane
	}{
		{Row{Row: store.Row{Projection: store.Projection{Lanes: store.Lanes{Urgent: true, Failing: true}}}}, LaneUrgent},
		{Row{Row: store.Row{Projection: store.Projection{Submitted: true, Lanes: store.Lanes{Failing: true}}}}, LaneCold},
		{Row{Row: store.Row{Projection: store.Projection{Lanes: store.Lanes{NeverRendered: true}}}}, LaneCold},
		{Row{Row: store.Row{Projection: store.Projection{Submitted: true}}}, LaneSubmitted},
		{Row{}, LaneDiscovered},
	} {
		if got := LaneOf(&tc.r); got != tc.want {
			t.Errorf("%+v: lane %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestRouteOf(t *testing.T) {
	p := testPolicy(t)
	if name, swr := p.RouteOf([]byte("desktop|https://a.test/c/x")); name != "catalog" || swr != 6*hour {
		t.Fatalf("catalog: %q %d", name, swr)
	}
	if name, swr := p.RouteOf([]byte("desktop|https://a.test/zzz")); name != "" || swr != 3*hour {
		t.Fatalf("no route: %q %d", name, swr)
	}
}

// urlPathReference is URLPath as first written, with IndexAny: the fast one must agree with it.
func urlPathReference(cacheKey []byte) []byte {
	u := cacheKey
	if i := bytes.IndexByte(u, '|'); i >= 0 {
		u = u[i+1:]
	}
	if i := bytes.Index(u, []byte("://")); i >= 0 {
		u = u[i+3:]
		j := bytes.IndexByte(u, '/')
		if j < 0 {
			return []byte("/")
		}
		u = u[j:]
	}
	if i := bytes.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if len(u) == 0 {
		return []byte("/")
	}
	return u
}

func TestURLPathAgreesWithReference(t *testing.T) {
	parts := []string{"", "desktop|", "|", "https://", "://", "a.test", "/", "/c/x", "?", "#", "p=1", "?#", "#?", ":"}
	// Every sequence of up to four parts: separators in every order and position.
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if got, want := URLPath([]byte(prefix)), urlPathReference([]byte(prefix)); !bytes.Equal(got, want) {
			t.Fatalf("URLPath(%q) = %q, reference %q", prefix, got, want)
		}
		if depth == 4 {
			return
		}
		for _, p := range parts {
			walk(prefix+p, depth+1)
		}
	}
	walk("", 0)
}

func BenchmarkCadence(b *testing.B) {
	p := testPolicy(b)
	keys := [][]byte{
		[]byte("desktop|https://shop.example.test/c/category-0000042/page"),
		[]byte("mobile|https://shop.example.test/p/product-0000042-detail?ref=x"),
		[]byte("desktop|https://shop.example.test/"),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := Row{Key: keys[i%len(keys)], Row: store.Row{Projection: store.Projection{EffectiveIntervalMs: int64(i&1) * 6 * hour}}}
		p.Cadence(&r)
	}
}

// TestWithScorerReplacesScoreOnly: a policy built WithScorer ranks due rows by the scorer; the
// policy it came from keeps relative lateness, and a row not due or without a finite due time
// still scores 0 whatever the scorer says.
func TestWithScorerReplacesScoreOnly(t *testing.T) {
	p := testPolicy(t)
	var seen *Row
	fp := p.WithScorer(func(r *Row, cadenceMs, nowMs int64) float64 {
		seen = r
		return float64(len(r.Key)) + float64(cadenceMs)/float64(hour) + float64(nowMs-r.DueAtMs)/float64(hour)
	})
	r := &Row{Key: []byte("desktop|https://a.test/p/1"), Row: store.Row{DueAtMs: now - 2*hour}}
	if got, want := fp.Score(r, 48*hour, now), float64(len(r.Key))+48+2; got != want || seen != r {
		t.Errorf("scorer policy: Score = %v, want %v from the scorer given the row", got, want)
	}
	if got := p.Score(r, 48*hour, now); got != 2.0/48 {
		t.Errorf("the original policy's Score = %v after WithScorer, want relative lateness %v", got, 2.0/48)
	}
	for _, due := range []int64{0, -1, MaxDueMs, now, now + hour} {
		if got := fp.Score(&Row{Key: r.Key, Row: store.Row{DueAtMs: due}}, 48*hour, now); got != 0 {
			t.Errorf("due %d: scorer policy scored %v, want 0", due, got)
		}
	}
	if got := fp.WithScorer(nil).Score(r, 48*hour, now); got != 2.0/48 {
		t.Errorf("WithScorer(nil): Score = %v, want relative lateness again", got)
	}
}
