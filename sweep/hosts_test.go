package sweep

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// 5 workers × 10 renders: 40 render slots. A set of 100 gives a host limited to 2 at most
// ⌈2 · 100 · 2 / 40⌉ = 10 entries.
const politeness = routes + `
workers: 5
queue:
  ready: {capacity: 100}
` + politeRender

const politeRender = `
render:
  concurrency: 10
  hosts:
    max_concurrency: 2
    overrides: {"wide.test": 40}
`

func publishedPerHost(t *testing.T, seg *shm.Segment) map[string]int {
	out := map[string]int{}
	for _, e := range takeAll(t, seg) {
		out[string(cachekey.Host(e.Key))]++
	}
	return out
}

// One host with most of the due rows gets its share of the set and no more; the other hosts
// fill the rest, and a host whose share is the whole set is not capped.
func TestSweepCapsEachHostToItsShare(t *testing.T) {
	e := newEnv(t, politeness, start, shm.Options{})
	for i := range 500 { // the big host's rows are the latest: they would fill the set
		e.Put(fmt.Sprintf("desktop|https://big.test/c/%03d", i), start-3*hour, true, 0, store.Lanes{})
	}
	for i := range 30 {
		e.Put(fmt.Sprintf("desktop|https://small%d.test/c/%d", i%3, i), start-hour-int64(i), true, 0, store.Lanes{})
		e.Put(fmt.Sprintf("desktop|https://wide.test/c/%d", i), start-hour-int64(i), true, 0, store.Lanes{})
	}
	res, err := newSweeper(e, nil).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := publishedPerHost(t, e.Seg)
	want := map[string]int{"big.test": 10, "small0.test": 10, "small1.test": 10, "small2.test": 10, "wide.test": 30}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("published per host %v, want %v", got, want)
	}
	if res.ExcludedHostCapped != 490 || res.Published != 70 {
		t.Fatalf("capped %d, published %d; want 490 and 70", res.ExcludedHostCapped, res.Published)
	}
}

// big.test's rows are the latest, so the best: unspread, its ten entries would be the set's
// first ten, and every take would meet them while the host is full. Spread, no prefix of the
// set holds more than its limit (2) plus its share (10 of 100) of the prefix.
func TestSweepSpreadsACappedHostThroughTheSet(t *testing.T) {
	e := newEnv(t, politeness, start, shm.Options{})
	for i := range 500 {
		e.Put(fmt.Sprintf("desktop|https://big.test/c/%03d", i), start-3*hour, true, 0, store.Lanes{})
	}
	for i := range 90 {
		e.Put(fmt.Sprintf("desktop|https://wide.test/c/%d", i), start-hour-int64(i), true, 0, store.Lanes{})
	}
	if _, err := newSweeper(e, nil).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := takeAll(t, e.Seg)
	big, order := 0, ""
	for m, en := range entries {
		if string(cachekey.Host(en.Key)) != "big.test" {
			order += "."
			continue
		}
		order += "B"
		if allowed := 2 + m/10; big >= allowed {
			t.Fatalf("big.test's entry at position %d after %d of them; its share allows %d: %s", m, big, allowed, order)
		}
		big++
	}
	if big != 10 || len(entries) != 100 {
		t.Fatalf("%d entries, %d of big.test: %s", len(entries), big, order)
	}
	t.Logf("the set, big.test as B: %s", order)
}

// A row evicted from the selector by a better row gives its host's place back: a host's share
// is counted over what the set holds, not over what was offered.
func TestSweepHostCapCountsEvictions(t *testing.T) {
	// A set of 20: big.test may hold ⌈2·20·2/40⌉ = 2 entries.
	e := newEnv(t, routes+"workers: 5\nqueue:\n  ready: {capacity: 20}\n"+politeRender, start, shm.Options{})
	for i := range 2 { // read first (the earliest due), and the worst scores: evicted below
		e.Put(fmt.Sprintf("desktop|https://big.test/p/early%d", i), start-2*hour+int64(i), true, 0, store.Lanes{}) // 2 h late on 48 h
	}
	for i := range 20 {
		e.Put(fmt.Sprintf("desktop|https://wide.test/c/%02d", i), start-3*hour/2+int64(i), true, 0, store.Lanes{}) // 1.5 h late on 24 h
	}
	e.Put("desktop|https://big.test/", start-hour+100, true, hour, store.Lanes{}) // home: an hour late on 1 h, the best row
	if _, err := newSweeper(e, nil).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := publishedPerHost(t, e.Seg)
	if got["big.test"] != 1 {
		t.Fatalf("published per host %v: big.test's home, read after its two evicted rows, should have their place", got)
	}
}

// A paused host has no entry in the set, and the sweep says when the first pause ends; once it
// has, the host's rows are published again.
func TestSweepLeavesPausedHostsOut(t *testing.T) {
	e := newEnv(t, politeness, start, shm.Options{})
	for i := range 5 {
		e.Put(fmt.Sprintf("desktop|https://big.test/c/%d", i), start-2*hour, true, 0, store.Lanes{})
		e.Put(fmt.Sprintf("desktop|https://wide.test/c/%d", i), start-hour, true, 0, store.Lanes{})
	}
	e.Seg.Hosts().Store(shm.HostState{Host: "big.test", PausedUntilMs: start + 2000, SinceMs: start, Cause: shm.HostCauseRetryAfter, Status: 429})
	s := newSweeper(e, nil)
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := publishedPerHost(t, e.Seg); got["big.test"] != 0 || got["wide.test"] != 5 {
		t.Fatalf("while big.test is paused: published %v", got)
	}
	if res.ExcludedHostPaused != 5 || res.HostResumeMs != start+2000 {
		t.Fatalf("excluded %d, resume at %d; want 5 and %d", res.ExcludedHostPaused, res.HostResumeMs, start+2000)
	}
	e.Advance(2000)
	if res, err = s.Sweep(context.Background()); err != nil || res.HostResumeMs != 0 {
		t.Fatalf("after the pause: %+v %v", res, err)
	}
	if got := publishedPerHost(t, e.Seg); got["big.test"] != 5 {
		t.Fatalf("after the pause: published %v", got)
	}
}

// The pass reads rows in due order, not in rank: a capped host's first rows are its oldest,
// and its home pages, due later but later by more of their cadence, would find its places
// taken. Its best rows are what it publishes, whichever it read first.
func TestSweepCappedHostPublishesItsBestRows(t *testing.T) {
	e := newEnv(t, politeness, start, shm.Options{}) // big.test: 10 entries
	// Products a day late on 48 h (score 0.5 × boost), read first; home pages an hour late on
	// 1 h (score 1 × boost), read last.
	for i := range 30 {
		e.Put(fmt.Sprintf("desktop|https://big.test/p/%02d", i), start-24*hour-int64(i), true, 0, store.Lanes{})
	}
	for i := range 3 {
		e.Put(fmt.Sprintf("desktop|https://big.test/?home=%d", i), start-hour+int64(i), true, hour, store.Lanes{})
	}
	res, err := newSweeper(e, nil).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	homes, big := 0, 0
	for _, en := range takeAll(t, e.Seg) {
		big++
		if strings.Contains(string(en.Key), "?home=") {
			homes++
		}
	}
	if homes != 3 || big != 10 || res.ExcludedHostCapped != 23 {
		t.Fatalf("published %d of big.test with %d of its 3 home pages, %d rows capped; want 10, 3 and 23", big, homes, res.ExcludedHostCapped)
	}
}

// A store of one host capped in the set: once the host holds its cap, no row left to read could
// enter the set, and the class merge stops there instead of reading the whole due set (a site
// whose render.hosts.max_concurrency is below the node's render slots, the usual deployment).
// It publishes what the full pass publishes of the host. A host that has rows but no row
// offered yet is not at its cap: a row of a second host, the least late of all, is read and
// published, and the merge does not stop before it.
//
// It fails if the merge reads on past the cap (rows read), or if it counts a host it has not
// met as settled (small.test's row is left out).
func TestClassMergeStopsOnceEveryHostHoldsItsCap(t *testing.T) {
	e := newEnv(t, politeness, start, shm.Options{})
	const rows = 3000
	for i := range rows {
		e.Put(fmt.Sprintf("desktop|https://big.test/c/%04d", i), start-3*hour-int64(i)*1000, true, 0, store.Lanes{})
	}
	merged, full, mres, fres := sweepBothWays(t, e, 0)
	if !mres.HostsSettled || mres.Rows > 10+settledEvery+maxChunk {
		t.Fatalf("one capped host: the merge read %d rows (settled %v); its cap is 10", mres.Rows, mres.HostsSettled)
	}
	if len(merged) != 10 || len(full) != 10 || fres.Rows != rows {
		t.Fatalf("published %d by the merge, %d by the full pass of %d rows; want 10 each", len(merged), len(full), fres.Rows)
	}
	for i := range merged { // rows best first: the merge keeps the host's ten latest
		if want := fmt.Sprintf("desktop|https://big.test/c/%04d", rows-1-i); !strings.Contains(fmt.Sprint(keysOf(merged)), want) {
			t.Fatalf("the merge published %v; want the ten latest rows, %s among them", keysOf(merged), want)
		}
	}

	e.Put("desktop|https://small.test/c/1", start-hour, true, 0, store.Lanes{}) // big.test's class, last in it
	merged, _, mres, _ = sweepBothWays(t, e, 0)
	if got := publishedHosts(merged); got["small.test"] != 1 || got["big.test"] != 10 {
		t.Fatalf("with a second host's row: published %v, want big.test 10 and small.test 1", got)
	}
	if mres.HostsSettled {
		t.Fatalf("the merge stopped as settled with small.test under its cap (read %d rows)", mres.Rows)
	}
}

func keysOf(es []shm.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Key)
	}
	return out
}

func publishedHosts(es []shm.Entry) map[string]int {
	out := map[string]int{}
	for _, e := range es {
		out[string(cachekey.Host(e.Key))]++
	}
	return out
}
