// Package renderlog is worker 0's bounded in-memory log of recent renders: what the console's
// page history (GET /v1/renders?url=) and failures view (GET /v1/failures) show.
//
// Invariants: the log holds at most MaxEntries entries and MaxBytes bytes of them (an entry's
// error and evidence are cut at MaxText bytes each, at most MaxEvidence lines), the oldest
// dropped first; it is lost when worker 0 restarts (it is a view of the recent past, not a
// record: the store holds what a page is). Recording never blocks a result for long: one
// mutex, no allocation beyond the entry.
package renderlog

import (
	"sync"
	"time"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/wire"
)

// Bounds of the log.
const (
	MaxEntries  = 10_000
	MaxBytes    = 8 << 20
	MaxText     = 512
	MaxEvidence = 3
	// MaxAnswer bounds the entries one answer lists.
	MaxAnswer = 200
)

// Entry is one render as the log keeps it. Changed and Verdict are set by a recorder that
// knows them (the applier: whether the content changed, the render's verdict); the results
// endpoint does not.
type Entry struct {
	At         time.Time `json:"at"`
	URL        string    `json:"url"`
	Device     string    `json:"device"`
	Outcome    string    `json:"outcome"`
	Status     int       `json:"status,omitempty"`
	Stage      string    `json:"stage,omitempty"`
	DurationMs int64     `json:"duration_ms"`
	Changed    bool      `json:"changed,omitempty"`
	Verdict    string    `json:"verdict,omitempty"`
	Class      string    `json:"class,omitempty"` // a failure's cause: transient or deterministic; "" for a page
	Error      string    `json:"error,omitempty"`
	Evidence   []string  `json:"evidence,omitempty"`
}

// Class is a failure's cause by outcome name: "" for an outcome that stored a page's answer
// (ok, noindex), deterministic for an answer that will not change by retrying (not_found,
// gone, client_error, redirect_loop, too_large, blocked), transient for the others.
func Class(outcome string) string {
	switch outcome {
	case "ok", "noindex":
		return ""
	case "not_found", "gone", "client_error", "redirect_loop", "too_large", "blocked":
		return "deterministic"
	}
	return "transient"
}

func (e *Entry) size() int {
	n := 128 + len(e.URL) + len(e.Device) + len(e.Outcome) + len(e.Stage) + len(e.Verdict) + len(e.Error)
	for _, s := range e.Evidence {
		n += len(s) + 16
	}
	return n
}

// Log is the bounded log. The zero value is not ready; use New. Safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	buf   []Entry // a ring: n entries from start, growing up to MaxEntries slots
	start int
	n     int
	bytes int
	now   func() time.Time
}

// New returns an empty log; now is its clock.
func New(now func() time.Time) *Log {
	return &Log{buf: make([]Entry, 0, 256), now: now}
}

func cut(s string) string {
	if len(s) > MaxText {
		return s[:MaxText] + "…"
	}
	return s
}

// Applied logs one result the applier applied (apply.RenderLog): its outcome and timing, with
// whether its content changed since the page's previous render and its verdict, which only the
// applier knows. A result whose key is not a cache key is not logged.
func (l *Log) Applied(r *wire.Result, changed bool, verdict string) {
	if l == nil {
		return
	}
	dev, u, ok := cachekey.Split(r.Key)
	if !ok {
		return
	}
	e := Entry{At: l.now(), URL: u, Device: dev, Outcome: r.Outcome, Status: r.Status, Stage: r.Stage,
		DurationMs: r.DurationMs, Changed: changed, Verdict: verdict, Class: Class(r.Outcome), Error: cut(r.Err)}
	if r.Signals != nil {
		for j, ev := range r.Signals.Evidence {
			if j == MaxEvidence {
				break
			}
			e.Evidence = append(e.Evidence, cut(ev))
		}
	}
	l.Record(e)
}

// Record logs one entry, dropping the oldest past the bounds.
func (l *Log) Record(e Entry) {
	if l == nil {
		return
	}
	e.URL, e.Error = cut(e.URL), cut(e.Error)
	if len(e.Evidence) > MaxEvidence {
		e.Evidence = e.Evidence[:MaxEvidence]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.n < len(l.buf): // a slot freed by a drop
		l.buf[(l.start+l.n)%len(l.buf)] = e
		l.n++
	case len(l.buf) < MaxEntries: // grow: put the ring in order first (only after drops)
		if l.start != 0 {
			l.buf = append(append([]Entry{}, l.buf[l.start:]...), l.buf[:l.start]...)
			l.start = 0
		}
		l.buf = append(l.buf, e)
		l.n++
	default: // full: the newest takes the oldest's slot
		l.bytes -= l.buf[l.start].size()
		l.buf[l.start] = e
		l.start = (l.start + 1) % len(l.buf)
	}
	l.bytes += e.size()
	for l.bytes > MaxBytes && l.n > 1 {
		l.bytes -= l.buf[l.start].size()
		l.buf[l.start] = Entry{}
		l.start = (l.start + 1) % len(l.buf)
		l.n--
	}
}

// newestFirst calls keep on the entries, newest first, until it returns false.
func (l *Log) newestFirst(keep func(*Entry) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := l.n - 1; i >= 0; i-- {
		if !keep(&l.buf[(l.start+i)%len(l.buf)]) {
			return
		}
	}
}

// Page is the page's renders, newest first (at most MaxAnswer); device "" is every device.
func (l *Log) Page(url, device string) []Entry {
	out := []Entry{}
	l.newestFirst(func(e *Entry) bool {
		if e.URL == url && (device == "" || e.Device == device) {
			out = append(out, *e)
		}
		return len(out) < MaxAnswer
	})
	return out
}

// Failures is the recent failures, newest first (at most MaxAnswer).
func (l *Log) Failures() []Entry {
	out := []Entry{}
	l.newestFirst(func(e *Entry) bool {
		if e.Class != "" {
			out = append(out, *e)
		}
		return len(out) < MaxAnswer
	})
	return out
}

// Len is the number of entries and their bytes, as bounded.
func (l *Log) Len() (entries, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.bytes
}
