package misses

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// missNode is worker 0's render on miss over a test store: Misses, and the Applier that wakes
// it. Waits end only when the test closes timeout (Misses.After), never with the wall clock.
type missNode struct {
	*qtest.Env
	misses  *Flights
	applier *apply.Applier
	timeout chan time.Time
}

const missURL = "https://shop.test/p/new"

var missKey = []byte("desktop|" + missURL)

func newMissNode(t *testing.T, yaml string) *missNode {
	e := qtest.New(t, "render: {domains: [shop.test]}\n"+yaml, start, shm.Options{})
	locks := &intake.KeyLocks{}
	n := &missNode{Env: e, timeout: make(chan time.Time)}
	n.misses = &Flights{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: e.Store, Deleter: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
		Settings: qtest.Settings(e, SettingsOf),
		After:    func(time.Duration) <-chan time.Time { return n.timeout }}
	n.applier = intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Locks: locks, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now, Misses: n.misses})
	t.Cleanup(n.misses.Stop) // a failed test leaves no goroutine waiting
	return n
}

type answer struct {
	page intake.ServedPage
	err  error
}

// wait starts k requests for url's page, each waiting, and returns their answers' channel.
func (n *missNode) wait(ctx context.Context, url string, k int) chan answer {
	key := []byte("desktop|" + url)
	out := make(chan answer, k)
	for range k {
		go func() {
			pg, err := n.misses.Wait(ctx, key, url, "", 10*time.Second)
			out <- answer{pg, err}
		}()
	}
	return out
}

// until polls the state of the flights until ok says it is reached (the goroutines got there);
// it is not a wait for time to pass.
func (n *missNode) until(t *testing.T, what string, ok func(flights, waiters int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, w := n.misses.Waiting()
		if ok(f, w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d flights, %d waiters", what, f, w)
		}
		runtime.Gosched()
	}
}

// render grants key as a render worker's claim would and applies its result.
func (n *missNode) render(t *testing.T, key []byte, outcome string, status int, body string) {
	t.Helper()
	st, err := n.applier.Apply([]wire.Result{{Key: key, Outcome: outcome, Status: status, Body: []byte(body), Lease: grant(t, n.Env, key)}})
	if err != nil || st.Applied != 1 {
		t.Fatalf("apply: %+v %v", st, err)
	}
}

// Concurrent requests for one unknown page share one flight: the target is created and rushed
// once, every request waits, and one applied result answers them all with its page.
func TestMissConcurrentWaitersShareOneRender(t *testing.T) {
	n := newMissNode(t, "")
	const k = 50
	answers := n.wait(context.Background(), missURL, k)
	n.until(t, "all joined", func(f, w int) bool { return f == 1 && w == k })
	row, err := n.Store.GetSchedule(missKey)
	if err != nil || !row.Lanes.Urgent || row.DueAtMs > n.Now() {
		t.Fatalf("the target is not filed rushed: %+v %v", row, err)
	}
	tgt, err := n.Store.GetTarget(missKey)
	if err != nil || tgt.Source != store.SourceDiscovered {
		t.Fatalf("target: %+v %v", tgt, err)
	}
	n.render(t, missKey, "ok", 200, "<html>new</html>")
	for range k {
		a := <-answers
		if a.err != nil || string(a.page.Body) != "<html>new</html>" || a.page.Status != 200 {
			t.Fatalf("waiter: %q %d %v", a.page.Body, a.page.Status, a.err)
		}
	}
	if f, w := n.misses.Waiting(); f != 0 || w != 0 {
		t.Fatalf("after the answers: %d flights, %d waiters", f, w)
	}
}

// A servable page is answered at once, with no flight, no rush and no wait.
func TestMissServedPageNeedsNoFlight(t *testing.T) {
	n := newMissNode(t, "")
	n.Put(string(missKey), start+hour, false, 0, store.Lanes{})
	n.render(t, missKey, "ok", 200, "cached")
	pg, err := n.misses.Wait(context.Background(), missKey, missURL, "", time.Second)
	if err != nil || string(pg.Body) != "cached" {
		t.Fatalf("%q %v", pg.Body, err)
	}
	if row, _ := n.Store.GetSchedule(missKey); row.Lanes.Urgent {
		t.Fatal("a served page was rushed")
	}
}

// A wait that passes answers intake.ErrWaitTimeout; the last waiter to leave removes the flight, and a
// render landing afterwards wakes nobody and breaks nothing.
func TestMissWaitTimesOut(t *testing.T) {
	n := newMissNode(t, "")
	answers := n.wait(context.Background(), missURL, 3)
	n.until(t, "joined", func(f, w int) bool { return f == 1 && w == 3 })
	close(n.timeout)
	for range 3 {
		if a := <-answers; !errors.Is(a.err, intake.ErrWaitTimeout) {
			t.Fatalf("got %v, want intake.ErrWaitTimeout", a.err)
		}
	}
	if f, w := n.misses.Waiting(); f != 0 || w != 0 {
		t.Fatalf("after the timeouts: %d flights, %d waiters", f, w)
	}
	n.render(t, missKey, "ok", 200, "late")
}

// A render that lands without a servable page answers every waiter intake.ErrRenderFailed, naming the
// outcome.
func TestMissRenderFailureAnswersEveryWaiter(t *testing.T) {
	n := newMissNode(t, "")
	answers := n.wait(context.Background(), missURL, 4)
	n.until(t, "joined", func(f, w int) bool { return f == 1 && w == 4 })
	n.render(t, missKey, "server_error", 503, "")
	for range 4 {
		a := <-answers
		if !errors.Is(a.err, intake.ErrRenderFailed) || a.err.Error() != "the render ended server_error without a servable page" {
			t.Fatalf("got %v, want intake.ErrRenderFailed", a.err)
		}
	}
}

// Stop answers every waiter intake.ErrStopping at once and refuses every request after it.
func TestMissStopAnswersWaiters(t *testing.T) {
	n := newMissNode(t, "")
	answers := n.wait(context.Background(), missURL, 5)
	n.until(t, "joined", func(f, w int) bool { return f == 1 && w == 5 })
	n.misses.Stop()
	for range 5 {
		if a := <-answers; !errors.Is(a.err, intake.ErrStopping) {
			t.Fatalf("got %v, want intake.ErrStopping", a.err)
		}
	}
	if _, err := n.misses.Wait(context.Background(), missKey, missURL, "", time.Second); !errors.Is(err, intake.ErrStopping) {
		t.Fatalf("after Stop: %v", err)
	}
	n.misses.Stop() // twice is safe
}

// A caller that gives up (a client disconnect) leaves the flight; the others keep waiting.
func TestMissCallerThatGivesUpLeaves(t *testing.T) {
	n := newMissNode(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	gone := n.wait(ctx, missURL, 2)
	stay := n.wait(context.Background(), missURL, 1)
	n.until(t, "joined", func(f, w int) bool { return f == 1 && w == 3 })
	cancel()
	for range 2 {
		if a := <-gone; !errors.Is(a.err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", a.err)
		}
	}
	n.until(t, "left", func(f, w int) bool { return f == 1 && w == 1 })
	n.render(t, missKey, "ok", 200, "kept")
	if a := <-stay; a.err != nil || string(a.page.Body) != "kept" {
		t.Fatalf("%q %v", a.page.Body, a.err)
	}
}

// Past page.max_waiters, and past the urgent lane's share of flights, a request is refused at
// once with intake.ErrOverloaded; the caps count what waits now, so a slot frees when a waiter leaves.
func TestMissCapsRefuseAtOnce(t *testing.T) {
	// ⌈0.001 × 2000⌉ = 2 flights; 3 waiters.
	n := newMissNode(t, "page: {max_waiters: 3, max_site_waiters: 3}\nqueue: {ready: {capacity: 2000}, lanes: {urgent_max_share: 0.001}}\n")
	if f, w := n.misses.Limits(); f != 2 || w != 3 {
		t.Fatalf("limits %d %d, want 2 3", f, w)
	}
	a := n.wait(context.Background(), "https://shop.test/p/a", 2)
	b := n.wait(context.Background(), "https://shop.test/p/b", 1)
	n.until(t, "joined", func(f, w int) bool { return f == 2 && w == 3 })
	_, err := n.misses.Wait(context.Background(), []byte("desktop|https://shop.test/p/a"), "https://shop.test/p/a", "", time.Second)
	if !errors.Is(err, intake.ErrOverloaded) || err.Error() != "3 requests are waiting for renders already (page.max_waiters)" {
		t.Fatalf("past max_waiters: %v", err)
	}
	n.render(t, []byte("desktop|https://shop.test/p/b"), "ok", 200, "b")
	if x := <-b; x.err != nil {
		t.Fatal(x.err)
	}
	c := n.wait(context.Background(), "https://shop.test/p/c", 1) // a second flight fits again
	n.until(t, "c joined", func(f, w int) bool { return f == 2 && w == 3 })
	n.Reload("page: {max_waiters: 10, max_site_waiters: 10}\nqueue: {ready: {capacity: 2000}, lanes: {urgent_max_share: 0.001}}\n")
	_, err = n.misses.Wait(context.Background(), []byte("desktop|https://shop.test/p/d"), "https://shop.test/p/d", "", time.Second)
	if !errors.Is(err, intake.ErrOverloaded) || err.Error() != fmt.Sprintf("2 renders on miss are in flight already, %s", "the urgent lane's share (queue.lanes.urgent_max_share × queue.ready.capacity)") {
		t.Fatalf("past the flights' cap: %v", err)
	}
	if _, err := n.Store.GetSchedule([]byte("desktop|https://shop.test/p/d")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused request filed its target: %v", err)
	}
	close(n.timeout)
	for _, ch := range []chan answer{a, a, c} {
		if x := <-ch; !errors.Is(x.err, intake.ErrWaitTimeout) {
			t.Fatal(x.err)
		}
	}
}

// One site holds at most page.max_site_waiters of the waiters: past its share its requests are
// refused at once with intake.ErrOverloaded naming the site (any port or subdomain of it counts), while
// another site's requests still join; a slot of the site frees when its waiter leaves.
func TestMissSiteShareRefusesAtOnce(t *testing.T) {
	n := newMissNode(t, "page: {max_waiters: 10, max_site_waiters: 2}\n")
	n.Reload("render: {domains: [shop.test, other.test]}\npage: {max_waiters: 10, max_site_waiters: 2}\n")
	a := n.wait(context.Background(), "https://shop.test/p/a", 1)
	b := n.wait(context.Background(), "https://www.shop.test:8443/p/b", 1)
	n.until(t, "the site's share joined", func(f, w int) bool { return f == 2 && w == 2 })
	for _, u := range []string{"https://shop.test/p/c", "https://shop.test/p/a", "https://cdn.shop.test/p/d"} {
		_, err := n.misses.Wait(context.Background(), []byte("desktop|"+u), u, "", time.Second)
		if !errors.Is(err, intake.ErrOverloaded) || !strings.Contains(err.Error(), "of shop.test already") {
			t.Fatalf("%s past the site's share: %v", u, err)
		}
	}
	c := n.wait(context.Background(), "https://other.test/p/e", 1)
	n.until(t, "another site joined", func(f, w int) bool { return f == 3 && w == 3 })
	n.render(t, []byte("desktop|https://shop.test/p/a"), "ok", 200, "a")
	if x := <-a; x.err != nil {
		t.Fatal(x.err)
	}
	d := n.wait(context.Background(), "https://shop.test/p/f", 1) // the site's slot is free again
	n.until(t, "the freed slot taken", func(f, w int) bool { return f == 3 && w == 3 })
	close(n.timeout)
	for _, ch := range []chan answer{b, c, d} {
		if x := <-ch; !errors.Is(x.err, intake.ErrWaitTimeout) {
			t.Fatal(x.err)
		}
	}
}

// A render of the key in flight (its lease held) is the one waited for: the request does not
// rush, which would revoke that render and render the page twice.
func TestMissJoinsARenderAlreadyInFlight(t *testing.T) {
	n := newMissNode(t, "")
	n.Put(string(missKey), start-hour, false, 0, store.Lanes{})
	lease := grant(t, n.Env, missKey)
	answers := n.wait(context.Background(), missURL, 2)
	n.until(t, "joined", func(f, w int) bool { return f == 1 && w == 2 })
	if row, _ := n.Store.GetSchedule(missKey); row.Lanes.Urgent {
		t.Fatal("rushed a key whose render is in flight")
	}
	st, err := n.applier.Apply([]wire.Result{{Key: missKey, Outcome: "ok", Status: 200, Body: []byte("inflight"), Lease: lease}})
	if err != nil || st.Applied != 1 {
		t.Fatalf("the render in flight was fenced: %+v %v", st, err)
	}
	for range 2 {
		if a := <-answers; a.err != nil || string(a.page.Body) != "inflight" {
			t.Fatalf("%q %v", a.page.Body, a.err)
		}
	}
}

// A page stored without waking the flight (in a cluster, by the node that owns the key's shard)
// is served when the wait ends, not a 504.
func TestMissTimeoutServesAPageAppliedElsewhere(t *testing.T) {
	n := newMissNode(t, "")
	answers := n.wait(context.Background(), missURL, 1)
	n.until(t, "joined", func(f, w int) bool { return f == 1 && w == 1 })
	other := intaketest.Applier(t, apply.ApplierDeps{Store: n.Store, Seg: n.Seg, Settings: qtest.Settings(n, IntakeSettingsOf), Now: n.Now}) // wakes nobody here
	if st, err := other.Apply([]wire.Result{{Key: missKey, Outcome: "ok", Status: 200, Body: []byte("elsewhere"), Lease: grant(t, n.Env, missKey)}}); err != nil || st.Applied != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	close(n.timeout)
	if a := <-answers; a.err != nil || string(a.page.Body) != "elsewhere" {
		t.Fatalf("%q %v", a.page.Body, a.err)
	}
}

// Render on miss files nothing for a host render.domains does not name, nor with an empty
// list; past its host's rate of new targets it refuses with the seconds to wait, filing nothing.
func TestMissOnlyForAllowedHostsWithinTheirRate(t *testing.T) {
	n := newMissNode(t, "serve: {miss_rate: 0.5, miss_burst: 1}\n")
	other := "https://evil.test/p/1"
	if _, err := n.misses.Wait(context.Background(), []byte("desktop|"+other), other, "", time.Second); !errors.Is(err, intake.ErrHostNotAllowed) {
		t.Fatalf("another host: %v", err)
	}
	answers := n.wait(context.Background(), missURL, 1)
	n.until(t, "started", func(f, w int) bool { return f == 1 && w == 1 })
	second := "https://shop.test/p/second"
	_, err := n.misses.Wait(context.Background(), []byte("desktop|"+second), second, "", time.Second)
	var rl *intake.RateLimitedError
	if !errors.As(err, &rl) || !errors.Is(err, intake.ErrRateLimited) || rl.RetryAfterSec != 2 || rl.Host != "shop.test" {
		t.Fatalf("past the burst: %v", err)
	}
	if rows := n.AllRows(); len(rows) != 1 || string(rows[0].Key) != string(missKey) {
		t.Fatalf("rows %v, want the first miss's only", rows)
	}
	close(n.timeout)
	<-answers

	empty := newMissNode(t, "")
	empty.Reload("render: {domains: []}\n")
	if _, err := empty.misses.Wait(context.Background(), missKey, missURL, "", time.Second); !errors.Is(err, intake.ErrHostNotAllowed) {
		t.Fatalf("empty render.domains: %v", err)
	}
	if rows := empty.AllRows(); len(rows) != 0 {
		t.Fatalf("a refused miss filed %d rows", len(rows))
	}
}

// The rate of new targets is the site's, as render.domains names it: another port and a
// subdomain of shop.test take from shop.test's burst, and the refusal names the site; another
// site has a burst of its own.
func TestMissRateIsPerSite(t *testing.T) {
	n := newMissNode(t, "serve: {miss_rate: 0.5, miss_burst: 2}\n")
	n.Reload("render: {domains: [shop.test, other.test]}\nserve: {miss_rate: 0.5, miss_burst: 2}\n")
	first := n.wait(context.Background(), "https://shop.test:8443/p/a", 1)
	n.until(t, "the first started", func(f, w int) bool { return f == 1 && w == 1 })
	second := n.wait(context.Background(), "https://www.shop.test/p/b", 1)
	n.until(t, "the second started", func(f, w int) bool { return f == 2 && w == 2 })
	for _, u := range []string{"https://shop.test:9443/p/c", "https://cdn.shop.test:8080/p/d", "https://shop.test/p/e"} {
		err := n.refusedAtOnce(t, u, 2)
		var rl *intake.RateLimitedError
		if !errors.As(err, &rl) || rl.Host != "shop.test" {
			t.Fatalf("%s past the site's burst: %v", u, err)
		}
	}
	third := n.wait(context.Background(), "https://other.test:81/p/f", 1)
	n.until(t, "another site started", func(f, w int) bool { return f == 3 && w == 3 })
	if rows := n.AllRows(); len(rows) != 3 {
		t.Fatalf("%d rows, want the 2 of shop.test's burst and other.test's 1", len(rows))
	}
	close(n.timeout)
	<-first
	<-second
	<-third
}

// refusedAtOnce asks for url's page and returns Wait's error when the request is answered
// without waiting; one that joins a flight instead (a waiter beside the waiting ones) fails
// the test, its request cancelled, rather than wait for a render that never comes.
func (n *missNode) refusedAtOnce(t *testing.T, url string, waiting int) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := n.misses.Wait(ctx, []byte("desktop|"+url), url, "", time.Second)
		done <- err
	}()
	// A refused request joins its flight for a moment before it is refused, so the waiters seen
	// meanwhile say nothing; a request that is not refused waits until the test ends its wait
	// (n.timeout), which this never does: it would not return within the bound.
	select {
	case err := <-done:
		if _, w := n.misses.Waiting(); w > waiting {
			t.Fatalf("%s was refused, yet %d wait, want %d", url, w, waiting)
		}
		return err
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("%s was not refused: it waits for a render (%v)", url, <-done)
		return nil
	}
}
