package sitemapruns

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/intaketest"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

const runsYAML = "render:\n  domains: [\"127.0.0.1\", \"shop.test\"]\n"

func newRuns(t *testing.T, w intake.Writer) (*qtest.Env, *Runs) {
	e := qtest.New(t, runsYAML, start, shm.Options{})
	if w == nil {
		w = e.Store
	}
	return e, &Runs{Targets: intaketest.Targets(t, intake.TargetsDeps{Store: e.Store, Writer: w, Deleter: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, IntakeSettingsOf), Now: e.Now}),
		Settings: qtest.Settings(e, SettingsOf)}
}

func urlset(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for i := range n {
		fmt.Fprintf(&b, "<url><loc>https://shop.test/%s/%d</loc><changefreq>daily</changefreq></url>\n", prefix, i)
	}
	return b.String() + "</urlset>"
}

// spooled is a sitemap file as a POST's body is handed to Submit.
func spooled(t *testing.T, body string) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "body-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(body); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitRun polls run id until it is no longer running (a condition with a deadline, no sleep
// standing in for time passing).
func waitRun(t *testing.T, s *Runs, id string) wire.SitemapRun {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run, err := s.Run(id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != wire.RunRunning {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still running: %+v", id, run)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopWithin calls Stop and fails the test if it has not returned by the deadline.
func stopWithin(t *testing.T, s *Runs) {
	t.Helper()
	done := make(chan struct{})
	go func() { s.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return")
	}
}

// The startstop contract: Stop without Start, and Stop twice, are no-ops; a run is refused
// (intake.ErrClosed) before Start and after Stop, and accepted between them.
func TestSitemapRunsStopWithoutStartAndTwice(t *testing.T) {
	_, s := newRuns(t, nil)
	s.Stop()
	s.Stop()
	if _, err := s.Submit(wire.SitemapRequest{}, spooled(t, urlset("a", 1))); !errors.Is(err, intake.ErrClosed) {
		t.Fatalf("Submit before Start: %v, want intake.ErrClosed", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	run, err := s.Submit(wire.SitemapRequest{}, spooled(t, urlset("a", 3)))
	if err != nil {
		t.Fatal(err)
	}
	if got := waitRun(t, s, run.ID); got.Status != wire.RunDone || got.Added.Count != 3 {
		t.Fatalf("run %+v", got)
	}
	stopWithin(t, s)
	stopWithin(t, s)
	if _, err := s.Submit(wire.SitemapRequest{}, spooled(t, urlset("b", 1))); !errors.Is(err, intake.ErrClosed) ||
		!strings.Contains(err.Error(), "worker 0 is stopping") {
		t.Fatalf("Submit after Stop: %v, want intake.ErrClosed", err)
	}
}

// A run fetches under the context Start gave: Stop (and the end of Start's context) cuts a
// fetch in flight against a server that never answers, and the run reports why.
func TestSitemapRunsStopCancelsAFetchInFlight(t *testing.T) {
	for _, how := range []string{"Stop", "Start's context"} {
		t.Run(how, func(t *testing.T) {
			arrived, cut := make(chan struct{}, 1), make(chan struct{}, 1)
			release := make(chan struct{})
			defer close(release)
			hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- struct{}{}
				select {
				case <-r.Context().Done(): // the client went away: its fetch was cancelled
					cut <- struct{}{}
				case <-release:
				}
			}))
			defer hang.Close()
			_, s := newRuns(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			run, err := s.Submit(wire.SitemapRequest{URL: hang.URL + "/sitemap.xml"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			<-arrived
			if how == "Stop" {
				stopWithin(t, s)
			} else {
				cancel()
				stopWithin(t, s) // waits for the runs, which end with ctx
			}
			select {
			case <-cut:
			case <-time.After(30 * time.Second):
				t.Fatal("the fetch in flight was not cancelled")
			}
			got, _ := s.Run(run.ID)
			if got.Status != wire.RunFailed || !strings.Contains(got.Error, "shutting down") {
				t.Fatalf("run after %s: %+v", how, got)
			}
		})
	}
}

// Stop waits for the chunk a run is writing to commit, and once it returns nothing of the run
// is written again.
func TestSitemapRunsStopWaitsForTheChunkInFlight(t *testing.T) {
	var writes, committed atomic.Int64
	inWrite, release := make(chan struct{}), make(chan struct{})
	var e *qtest.Env
	e, s := newRuns(t, writerFunc(func(ws []store.Write) error {
		if writes.Add(1) == 1 {
			close(inWrite)
			<-release // the first chunk is being written when Stop is called
		}
		err := e.Store.WriteSchedules(ws)
		committed.Add(1)
		return err
	}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	run, err := s.Submit(wire.SitemapRequest{}, spooled(t, urlset("c", 5*intake.ChunkItems)))
	if err != nil {
		t.Fatal(err)
	}
	<-inWrite
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	close(release)
	<-stopped
	if committed.Load() != 1 || writes.Load() != 1 {
		t.Fatalf("Stop returned with %d writes, %d committed; want the one in flight, committed", writes.Load(), committed.Load())
	}
	got, _ := s.Run(run.ID)
	if got.Status != wire.RunFailed || !strings.Contains(got.Error, "shutting down") {
		t.Fatalf("run after Stop: %+v", got)
	}
	if writes.Load() != 1 || len(e.AllRows()) != intake.ChunkItems {
		t.Fatalf("%d writes and %d rows after Stop returned", writes.Load(), len(e.AllRows()))
	}
}

// Runs are kept in memory, the last MaxRuns of them, never dropping one in progress; at
// most MaxRunning proceed at once and more are refused with intake.ErrTooMany. (Each <url> is
// filed for both devices the default configuration renders.)
func TestSitemapRunsBounded(t *testing.T) {
	e, s := newRuns(t, nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var first string
	for i := range MaxRuns + 20 {
		run, err := s.Submit(wire.SitemapRequest{}, spooled(t, urlset(fmt.Sprint(i), 1)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = run.ID
		}
		waitRun(t, s, run.ID)
	}
	s.mu.Lock()
	kept := len(s.runs)
	_, firstKept := s.runs[first]
	s.running = MaxRunning // as if that many were in progress
	s.mu.Unlock()
	if kept != MaxRuns || firstKept || len(e.AllRows()) != (MaxRuns+20)*2 {
		t.Fatalf("kept %d runs (the first: %v), %d rows", kept, firstKept, len(e.AllRows()))
	}
	if _, err := s.Submit(wire.SitemapRequest{}, spooled(t, urlset("x", 1))); !errors.Is(err, intake.ErrTooMany) {
		t.Fatalf("over %d runs in progress: %v", MaxRunning, err)
	}
	s.mu.Lock()
	s.running = 0
	s.mu.Unlock()
	var fe *intake.FieldError
	if _, err := s.Run(first); !errors.Is(err, intake.ErrNotFound) || !errors.As(err, &fe) || fe.Field != "id" {
		t.Fatalf("an evicted run: %v", err)
	}
}

// Submit refuses a URL outside render.domains and an unknown device, naming the field, and
// removes the body it was handed either way.
func TestSitemapRunsSubmitRefusesNamingTheField(t *testing.T) {
	_, s := newRuns(t, nil)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	var fe *intake.FieldError
	if _, err := s.Submit(wire.SitemapRequest{URL: "https://elsewhere.test/sitemap.xml"}, nil); !errors.As(err, &fe) || fe.Field != "url" {
		t.Fatalf("a host outside render.domains: %v", err)
	}
	body := spooled(t, urlset("d", 1))
	if _, err := s.Submit(wire.SitemapRequest{Device: "tv"}, body); !errors.As(err, &fe) || fe.Field != "device" {
		t.Fatalf("an unknown device: %v", err)
	}
	if _, err := os.Stat(body.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused body was left behind: %v", err)
	}
}

// A <lastmod> is read in each form of the W3C Datetime sitemaps use; anything else is none.
func TestLastmodForms(t *testing.T) {
	for v, want := range map[string]int64{
		"2026-12-07":                    time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).UnixMilli(),
		"2026-12-07T10:30+01:00":        time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC).UnixMilli(),
		"2026-12-07T10:30:15Z":          time.Date(2026, 12, 7, 10, 30, 15, 0, time.UTC).UnixMilli(),
		" 2026-12-07T10:30:15.5-02:00 ": time.Date(2026, 12, 7, 12, 30, 15, 5e8, time.UTC).UnixMilli(),
		"":                              0,
		"yesterday":                     0,
		"2026-13-01":                    0,
	} {
		if got := lastmodMs(v); got != want {
			t.Errorf("lastmod %q: %d, want %d", v, got, want)
		}
	}
}
