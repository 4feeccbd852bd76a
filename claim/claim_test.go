package claim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/sweep"
	"github.com/freshq/freshq/testkit/qtest"
)

const (
	hour  = qtest.Hour
	start = int64(1_800_000_000_000)
)

const routes = `
routes:
  - {name: home, match: exact, path: /, interval: 1h}
  - {name: catalog, match: prefix, path: /c/, interval: 24h}
  - {name: product, match: prefix, path: /p/, interval: 48h}
`

// countingScanner is the instrumented store: it counts every index read the fallback makes.
type countingScanner struct {
	Scanner
	scans    atomic.Int64
	lastFrom atomic.Int64 // where the last scan started
}

func (c *countingScanner) ScanDue(floor, now int64, limit int) (store.ScanResult, error) {
	c.scans.Add(1)
	c.lastFrom.Store(floor)
	return c.Scanner.ScanDue(floor, now, limit)
}

func (c *countingScanner) ScanDueAfter(afterMs int64, afterKey []byte, now int64, limit int) (store.ScanResult, error) {
	c.scans.Add(1)
	return c.Scanner.ScanDueAfter(afterMs, afterKey, now, limit)
}

type node struct {
	*qtest.Env
	scanner *countingScanner
	sweeper *sweep.Sweeper
	index   *IndexSource
}

func newNode(t *testing.T, yaml string) *node {
	e := qtest.New(t, yaml, start, shm.Options{})
	n := &node{Env: e, scanner: &countingScanner{Scanner: e.Store}}
	n.sweeper = qtest.Must(sweep.New(sweep.Options{Changes: sweep.NewChanges(), Store: sweep.FromStore(e.Store, nil), Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil)}))(t)
	n.index = &IndexSource{Scanner: n.scanner, Segment: e.Seg, Policy: e.Policy, Settings: qtest.Settings(e, ClaimSettingsOf), Now: e.Now}
	return n
}

func (n *node) claimer(worker int) *Claimer {
	w, err := n.Seg.Worker(worker)
	if err != nil {
		n.T.Fatal(err)
	}
	return qtest.Must(New(Options{Segment: n.Seg, Worker: w, Fallback: n.index, Settings: qtest.Settings(n, ClaimSettingsOf), Now: n.Now, Holder: uint64(worker)}))(n.T)
}

func (n *node) sweep() sweep.Result {
	n.T.Helper()
	res, err := n.sweeper.Sweep(context.Background())
	if err != nil {
		n.T.Fatal(err)
	}
	return res
}

// complete writes a job's result the way worker 0 will: rescheduled one cadence after now,
// rendered (no longer cold), and its lease released.
func (n *node) complete(j Job) {
	n.T.Helper()
	n.Put(string(j.Key), n.Now()+j.CadenceMs, j.Submitted, j.CadenceMs, store.Lanes{})
	n.Seg.Leases().Release(j.Lease, n.Now(), 0)
}

// The production symptom: a 1 h homepage two cadences late sits behind 400 rows that are three
// days older on 48 h cadences. It is granted first, and the claim that grants it reads no index.
func TestHomepageGrantedFirstWithZeroIndexReads(t *testing.T) {
	n := newNode(t, routes)
	home := "desktop|https://shop.test/"
	n.Put(home, start-2*hour, true, hour, store.Lanes{})
	for i := range 400 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/p/%03d", i), start-2*hour-72*hour-int64(i)*1000, true, 48*hour, store.Lanes{})
	}
	n.sweep()
	jobs, err := n.claimer(1).Claim(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || string(jobs[0].Key) != home || jobs[0].Source != SourceReady {
		t.Fatalf("granted %+v, want the homepage from the ready set", jobs)
	}
	if s := n.scanner.scans.Load(); s != 0 {
		t.Fatalf("the claim made %d index reads, want 0", s)
	}
	// The old order for comparison: the index scan grants the oldest product first.
	idx, err := n.index.ClaimIndex(context.Background(), IndexClaim{N: 1, Holder: 9})
	if err != nil || len(idx) != 1 || string(idx[0].Key) == home {
		t.Fatalf("index order granted %+v %v", idx, err)
	}
	w1, _ := n.Seg.Worker(1)
	if w1.Load(shm.CounterClaimReady) != 1 || w1.Load(shm.CounterClaimIndex) != 0 {
		t.Fatal("grant counters by source are wrong")
	}
}

func TestFallbackOnColdExhaustedAndDisabled(t *testing.T) {
	n := newNode(t, routes)
	for i := range 6 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%d", i), start-hour-int64(i), true, 0, store.Lanes{})
	}
	c := n.claimer(1)
	// Cold: nothing published yet.
	jobs, err := c.Claim(context.Background(), 2)
	if err != nil || len(jobs) != 2 || jobs[0].Source != SourceIndex || jobs[1].Source != SourceIndex {
		t.Fatalf("cold claim %+v %v", jobs, err)
	}
	for _, j := range jobs {
		n.complete(j)
	}
	// Published (4 rows due), then exhausted part-way through one claim.
	n.sweep()
	jobs, err = c.Claim(context.Background(), 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("granted %d, want the 4 due rows", len(jobs))
	}
	for _, j := range jobs {
		if j.Source != SourceReady {
			t.Fatalf("%q from %v; the ready set held every due row", j.Key, j.Source)
		}
	}
	scans := n.scanner.scans.Load()
	more, err := c.Claim(context.Background(), 1)
	if err != nil || len(more) != 0 || n.scanner.scans.Load() != scans+1 {
		t.Fatalf("exhausted claim: %+v %v; it must ask the index (and find every due row leased)", more, err)
	}
	// The scan starts at the first due row the sweep saw, not a guard behind it at the floor.
	if from, floor := n.scanner.lastFrom.Load(), n.Seg.Floor().Load(); from != start-hour-3 || floor >= from {
		t.Fatalf("the fallback scanned from %d (floor %d), want the head %d", from, floor, start-hour-3)
	}
	for _, j := range jobs {
		n.complete(j)
	}
	// Disabled by reload: the next claim goes to the index at once, before any sweep.
	n.Put("desktop|https://shop.test/c/new", start-hour, true, 0, store.Lanes{})
	n.sweep()
	n.Reload(routes + "queue:\n  ready: {enabled: false}\n")
	jobs, err = c.Claim(context.Background(), 1)
	if err != nil || len(jobs) != 1 || jobs[0].Source != SourceIndex {
		t.Fatalf("disabled claim %+v %v", jobs, err)
	}
}

// A leased row is never granted twice: the sweep leaves rows leased at publish time out of the
// set, a row leased between publish and take is refused at grant time, and the index fallback
// refuses it too.
func TestLeasedRowNeverGrantedTwice(t *testing.T) {
	n := newNode(t, routes)
	for i := range 20 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%02d", i), start-hour-int64(i), true, 0, store.Lanes{})
	}
	held := map[string]bool{}
	grant := func(jobs []Job) {
		for _, j := range jobs {
			if held[string(j.Key)] {
				t.Fatalf("%q granted twice (source %v)", j.Key, j.Source)
			}
			held[string(j.Key)] = true
		}
	}
	n.sweep()
	jobs, _ := n.claimer(1).Claim(context.Background(), 7)
	grant(jobs)
	// Sweep again without completing anything: the 7 leased rows stay out of the new set.
	if res := n.sweep(); res.ExcludedLeased != 7 || res.Published != 13 {
		t.Fatalf("second sweep left out %d leased rows and published %d; want 7 and 13", res.ExcludedLeased, res.Published)
	}
	// Three rows are leased elsewhere (a remote claim) after the publish: the grant refuses them.
	var e shm.Entry
	for range 3 {
		if n.Seg.Ready().Take(&e) != shm.Taken {
			t.Fatal("take")
		}
		if _, st := n.Seg.Leases().Acquire(e.KeyHash, n.Now(), 600_000, 77); st != shm.Acquired {
			t.Fatal(st)
		}
		held[string(e.Key)] = true
	}
	jobs, _ = n.claimer(2).Claim(context.Background(), 20)
	grant(jobs)
	jobs, _ = n.index.ClaimIndex(context.Background(), IndexClaim{N: 20, Holder: 3})
	grant(jobs)
	if len(held) != 20 {
		t.Fatalf("%d of 20 rows granted", len(held))
	}
	if idx, _ := n.index.ClaimIndex(context.Background(), IndexClaim{N: 20, Holder: 3}); len(idx) != 0 {
		t.Fatalf("the index granted %d leased rows", len(idx))
	}
}

// Lane shares hold batch after batch: urgent stays within its cap while other lanes have due
// rows, and discovered and cold get their floors whenever they have due rows.
func TestLaneSharesHoldOverManyBatches(t *testing.T) {
	n := newNode(t, routes+"queue:\n  ready: {capacity: 500}\n")
	rng := rand.New(rand.NewPCG(7, 8))
	lanes := func(i int) (submitted bool, l store.Lanes) {
		switch {
		case i%50 == 0:
			return true, store.Lanes{Urgent: true}
		case i%40 == 1:
			return true, store.Lanes{Failing: true}
		case i%3 == 0:
			return false, store.Lanes{}
		}
		return true, store.Lanes{}
	}
	for i := range 3000 {
		sitemap, l := lanes(i)
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%04d", i), start-int64(rng.IntN(48))*hour, sitemap, 6*hour, l)
	}
	const batch = 50
	shares := n.Policy().Shares()
	for b := range 40 {
		n.sweep()
		due := map[policy.Lane]int{}
		for _, r := range n.AllRows() {
			if r.DueAtMs <= n.Now() {
				due[policy.LaneOf(&policy.Row{Row: store.Row{Projection: store.Projection{Submitted: r.Submitted, Lanes: store.Lanes{Urgent: r.Urgent, Failing: r.Failing, NeverRendered: r.NeverRendered}}}})]++
			}
		}
		jobs, err := n.claimer(1).Claim(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		var got [policy.NumLanes]int
		for _, j := range jobs {
			got[j.Lane]++
		}
		m := float64(len(jobs))
		if others := due[policy.LaneSubmitted] + due[policy.LaneDiscovered] + due[policy.LaneCold]; others > 0 &&
			float64(got[policy.LaneUrgent]) > math.Ceil(shares.UrgentMax*m) {
			t.Fatalf("batch %d: %d urgent of %d, cap %v", b, got[policy.LaneUrgent], len(jobs), shares.UrgentMax)
		}
		for _, f := range []struct {
			lane  policy.Lane
			share float64
		}{{policy.LaneDiscovered, shares.DiscoveredMin}, {policy.LaneCold, shares.ColdMin}} {
			want := min(float64(due[f.lane]), math.Floor(f.share*m))
			if float64(got[f.lane]) < want {
				t.Fatalf("batch %d: %v got %d of %d, floor %v with %d due", b, f.lane, got[f.lane], len(jobs), want, due[f.lane])
			}
		}
		for _, j := range jobs {
			n.complete(j)
		}
		n.Advance(10 * 60_000)
	}
}

// F1 is checked after every step of a randomized run of writes (including writes filed below
// the floor and the guard), sweeps, claims from both sources and results. The floor must also
// advance while claims are served from memory.
func TestFloorInvariantUnderRandomOperations(t *testing.T) {
	n := newNode(t, routes+"queue:\n  ready: {capacity: 64}\n  claim_floor: {guard: 5m, unpin_after: 1h}\n")
	rng := rand.New(rand.NewPCG(11, 12))
	key := func() string { return fmt.Sprintf("desktop|https://shop.test/c/%03d", rng.IntN(300)) }
	var inflight []Job
	advanced := 0
	c := n.claimer(1)
	for step := range 3000 {
		var what string
		switch op := rng.IntN(10); {
		case op < 4:
			// A write due anywhere from 3 days ago (far below the floor) to a day ahead.
			what = "write"
			n.Put(key(), n.Now()-int64(rng.IntN(72*60))*60_000+int64(rng.IntN(24*60))*60_000, rng.IntN(2) == 0, 0, store.Lanes{})
		case op < 5:
			what = "sweep"
			if n.sweep().Advanced {
				advanced++
			}
		case op < 7:
			what = "claim"
			jobs, err := c.Claim(context.Background(), 1+rng.IntN(8))
			if err != nil {
				t.Fatal(err)
			}
			inflight = append(inflight, jobs...)
		case op < 9 && len(inflight) > 0:
			what = "result"
			i := rng.IntN(len(inflight))
			n.complete(inflight[i])
			inflight = append(inflight[:i], inflight[i+1:]...)
		default:
			what = "tick"
			n.Advance(int64(rng.IntN(20)) * 60_000)
		}
		n.CheckF1(fmt.Sprintf("step %d (%s)", step, what))
	}
	if advanced == 0 {
		t.Fatal("the floor never advanced")
	}
	if n.scanner.scans.Load() == 0 {
		t.Fatal("the run never exercised the index fallback")
	}
	t.Logf("floor advanced in %d sweeps; %d index scans", advanced, n.scanner.scans.Load())
}

// The bulk-import shape: the ready set disabled, 200 rows at one due ms, nothing completed.
// Paging on the due time alone granted the first page (64) and then nothing; paging on (due,
// key) grants all 200 across claims, each once.
func TestIndexFallbackPagesPastLeasedRowsAtOneDueMs(t *testing.T) {
	n := newNode(t, routes+"queue:\n  ready: {enabled: false}\n")
	for i := range 200 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%03d", i), start-hour, true, 0, store.Lanes{})
	}
	c := n.claimer(1)
	held := map[string]bool{}
	for claims := 0; claims < 100 && len(held) < 200; claims++ {
		jobs, err := c.Claim(context.Background(), 8)
		if err != nil || len(jobs) == 0 {
			t.Fatalf("claim %d after %d granted: %d jobs, %v", claims, len(held), len(jobs), err)
		}
		for _, j := range jobs {
			if held[string(j.Key)] {
				t.Fatalf("%q granted twice", j.Key)
			}
			held[string(j.Key)] = true
		}
	}
	if len(held) != 200 {
		t.Fatalf("%d of 200 granted", len(held))
	}
	if jobs, err := c.Claim(context.Background(), 8); len(jobs) != 0 || err != nil {
		t.Fatalf("every row leased and the scan read them all: %d jobs, %v; want empty", len(jobs), err)
	}
}

// A claim whose bounded scan read only leased rows, with more due behind them, says so: it is
// not "nothing to do". With fewer due rows than the bound, every row leased is "empty".
func TestIndexFallbackSaysQueuedBehindLeases(t *testing.T) {
	// Each granted row holds two leases, its own and its host's: room for both.
	n := newNode(t, routes+"queue:\n  max_leases: 8192\n  ready: {enabled: false}\n")
	const rows = maxIndexPages*64 + 50
	for i := range rows { // on two hosts: more than one host may have in flight (hosts.MaxTokens)
		n.Put(fmt.Sprintf("desktop|https://shop%d.test/c/%04d", i%2, i), start-hour-int64(i%3), true, 0, store.Lanes{})
	}
	got := 0
	for got < rows-10 {
		jobs, err := n.index.ClaimIndex(context.Background(), IndexClaim{N: min(500, rows-10-got), Holder: 5})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("after %d: %d %v", got, len(jobs), err)
		}
		got += len(jobs)
	}
	// 10 rows are left unleased, behind more than maxIndexPages pages of leased ones.
	jobs, err := n.claimer(1).Claim(context.Background(), 1)
	if !errors.Is(err, ErrQueuedBehindLeases) || len(jobs) != 0 {
		t.Fatalf("queued behind leases: %d jobs, %v", len(jobs), err)
	}
	// A claim large enough to page to them gets them.
	if jobs, err := n.index.ClaimIndex(context.Background(), IndexClaim{N: 400, Holder: 5}); err != nil || len(jobs) != 10 {
		t.Fatalf("large claim: %d %v", len(jobs), err)
	}
}

// The fallback leases for the TTL asked for, held within [MinLeaseTTL, queue.lease_ttl]; 0 is
// queue.lease_ttl. The ready path does the same.
func TestClaimHonoursRequestedTTL(t *testing.T) {
	n := newNode(t, routes+"queue:\n  lease_ttl: 10m\n  ready: {enabled: false}\n")
	for i := range 8 {
		n.Put(fmt.Sprintf("desktop|https://shop.test/c/%d", i), start-hour, true, 0, store.Lanes{})
	}
	for _, c := range []struct{ ask, want int64 }{{0, 10 * 60_000}, {3 * 60_000, 3 * 60_000}, {1, MinLeaseTTL.Milliseconds()}, {hour, 10 * 60_000}} {
		jobs, err := n.claimer(1).ClaimTTL(context.Background(), 1, c.ask)
		if err != nil || len(jobs) != 1 {
			t.Fatal(jobs, err)
		}
		li, _ := n.Seg.Leases().Lookup(jobs[0].KeyHash, n.Now())
		if got := li.ExpiresAtMs - n.Now(); got != c.want {
			t.Errorf("asked %d ms: leased for %d, want %d", c.ask, got, c.want)
		}
	}
	n.Reload(routes + "queue:\n  lease_ttl: 10m\n")
	n.sweep()
	jobs, _ := n.claimer(2).ClaimTTL(context.Background(), 1, 3*60_000)
	if li, _ := n.Seg.Leases().Lookup(jobs[0].KeyHash, n.Now()); len(jobs) != 1 || jobs[0].Source != SourceReady || li.ExpiresAtMs-n.Now() != 3*60_000 {
		t.Fatalf("ready path: %+v %+v", jobs, li)
	}
}

// New refuses each required option left out, naming it: a claimer without its fallback would
// stall on a cold ready set instead of degrading to the index scan.
func TestNewRefusesAMissingDependency(t *testing.T) {
	n := newNode(t, "")
	full := Options{Segment: n.Seg, Fallback: n.index, Settings: qtest.Settings(n, ClaimSettingsOf), Now: n.Now}
	if _, err := New(full); err != nil {
		t.Fatalf("every option given: %v", err)
	}
	for name, drop := range map[string]func(*Options){
		"Segment":  func(o *Options) { o.Segment = nil },
		"Fallback": func(o *Options) { o.Fallback = nil },
		"Settings": func(o *Options) { o.Settings = nil },
		"Now":      func(o *Options) { o.Now = nil },
	} {
		o := full
		drop(&o)
		c, err := New(o)
		if c != nil || !errors.Is(err, ErrMissingDependency) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v, %v; want ErrMissingDependency naming it", name, c, err)
		}
	}
}

// A job carries its row's checkable hint (the target's origin sent validators) from both
// sources: through the sweep and the ready set, and from the floored index scan.
func TestJobsCarryTheCheckableHint(t *testing.T) {
	n := newNode(t, routes)
	want := map[string]bool{}
	for i := range 6 {
		key := fmt.Sprintf("desktop|https://shop.test/c/%d", i)
		sch, err := store.NewSchedule([]byte(key), start-hour-int64(i), true, 0, store.Lanes{})
		if err != nil {
			t.Fatal(err)
		}
		tg := store.Target{URL: "https://shop.test/c/", Device: "desktop", Source: store.SourceSitemap}
		if i%2 == 0 {
			tg.Fresh.ETag = `"v1"`
		}
		if err := n.Store.WriteSchedules([]store.Write{{Schedule: sch, Target: &tg}}); err != nil {
			t.Fatal(err)
		}
		want[key] = i%2 == 0
	}
	check := func(jobs []Job, src Source) {
		t.Helper()
		if len(jobs) == 0 {
			t.Fatalf("no job from %v", src)
		}
		for _, j := range jobs {
			if j.Source != src || j.Checkable != want[string(j.Key)] {
				t.Fatalf("job %q from %v: checkable %v, want %v from %v", j.Key, j.Source, j.Checkable, want[string(j.Key)], src)
			}
		}
	}
	idx, err := n.index.ClaimIndex(context.Background(), IndexClaim{N: 3, Holder: 9})
	if err != nil {
		t.Fatal(err)
	}
	check(idx, SourceIndex)
	n.sweep()
	jobs, err := n.claimer(1).Claim(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	check(jobs, SourceReady)
}
