package renderlog

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/wire"
)

// The log keeps at most MaxEntries entries, the newest, and answers a page's renders and the
// failures newest first.
func TestLogIsBoundedInEntries(t *testing.T) {
	l := New(time.Now)
	for i := range MaxEntries + 50 {
		out := "ok"
		if i%2 == 1 {
			out = "timeout"
		}
		l.Record(Entry{URL: "https://shop.test/p/" + strconv.Itoa(i%100), Outcome: out, Class: Class(out), DurationMs: int64(i)})
	}
	if n, _ := l.Len(); n != MaxEntries {
		t.Fatalf("%d entries, want %d", n, MaxEntries)
	}
	page := l.Page("https://shop.test/p/7", "")
	if len(page) != MaxEntries/100 || page[0].DurationMs != MaxEntries+50-43 {
		t.Errorf("page p/7: %d renders, newest %d; want %d, newest %d", len(page), page[0].DurationMs, MaxEntries/100, MaxEntries+50-43)
	}
	for i := 1; i < len(page); i++ {
		if page[i].DurationMs >= page[i-1].DurationMs {
			t.Fatal("a page's renders are not newest first")
		}
	}
	f := l.Failures()
	if len(f) != MaxAnswer {
		t.Errorf("%d failures, want the answer's bound %d", len(f), MaxAnswer)
	}
	for _, e := range f {
		if e.Outcome != "timeout" || e.Class != "transient" {
			t.Fatalf("failure %+v", e)
		}
	}
}

// Long errors and evidence are cut, and the log's bytes stay under MaxBytes however long the
// entries.
func TestLogIsBoundedInBytes(t *testing.T) {
	l := New(time.Now)
	long := strings.Repeat("x", 100_000)
	for i := range 50_000 {
		l.Applied(&wire.Result{Key: cachekey.New("desktop", "https://shop.test/"+strconv.Itoa(i)+"/"+long[:2000]), Outcome: "server_error",
			Err: long, Signals: &wire.Signals{Evidence: []string{long, long, long, long, long}}}, false, "")
	}
	n, b := l.Len()
	if b > MaxBytes || n == 0 {
		t.Fatalf("%d entries of %d bytes: over %d", n, b, MaxBytes)
	}
	e := l.Failures()[0]
	if len(e.Error) > MaxText+3 || len(e.Evidence) != MaxEvidence || len(e.Evidence[0]) > MaxText+3 || len(e.URL) > MaxText+3 {
		t.Errorf("an entry is not cut: error %d bytes, %d evidence lines", len(e.Error), len(e.Evidence))
	}
}

// What the applier knows of a render it applied, whether its content changed and its
// verdict, is logged with it.
func TestAppliedKeepsChangeAndVerdict(t *testing.T) {
	l := New(time.Now)
	l.Applied(&wire.Result{Key: cachekey.New("desktop", "https://shop.test/a"), Outcome: "ok", Status: 200}, true, "good")
	l.Applied(&wire.Result{Key: cachekey.New("desktop", "https://shop.test/a"), Outcome: "ok", Status: 200}, false, "exception,lost_h1")
	l.Applied(&wire.Result{Key: []byte("not a cache key"), Outcome: "ok"}, false, "")
	got := l.Page("https://shop.test/a", "")
	if len(got) != 2 || got[0].Verdict != "exception,lost_h1" || got[0].Changed || got[1].Verdict != "good" || !got[1].Changed {
		t.Fatalf("logged %+v, want the suspect (newest) then the good, changed render", got)
	}
}
