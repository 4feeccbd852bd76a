package hosts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/outcome"
	"github.com/freshq/freshq/shm"
)

// memSegment is a segment formatted on ordinary, 8-byte aligned memory.
func memSegment(t testing.TB) *shm.Segment {
	t.Helper()
	opts := shm.Options{ReadyCapacity: 8, KeyCapacity: 64, LeaseCapacity: 64, Workers: 2, EpochMs: t0 - 1, HostCapacity: 64}
	size, err := shm.SizeFor(opts)
	if err != nil {
		t.Fatal(err)
	}
	words := make([]uint64, (size+7)/8)
	seg, err := shm.Format(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8), opts)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

func newTracker(t *testing.T, yaml string) (*Tracker, *bytes.Buffer) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitsOf(cfg.Render.Hosts, cfg.Render.Domains...)
	var buf bytes.Buffer
	return &Tracker{Seg: memSegment(t), Limits: func() *Limits { return &lim }, Log: zerolog.New(&buf)}, &buf
}

// logLines decodes the lines logged since the last call, and empties the buffer.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	buf.Reset()
	return out
}

func wantLog(t *testing.T, buf *bytes.Buffer, msg string, fields map[string]any) {
	t.Helper()
	lines := logLines(t, buf)
	if len(lines) != 1 || lines[0]["message"] != msg {
		t.Fatalf("logged %v, want one %q line", lines, msg)
	}
	for k, v := range fields {
		if lines[0][k] != v {
			t.Errorf("%q: %s = %v, want %v (%v)", msg, k, lines[0][k], v, lines[0])
		}
	}
}

// A host's life through the Tracker, as the render workers see it in the shared table: paused
// by a 429 with Retry-After, throttled by its 5xx, restored by its successes; one log line per
// change and none otherwise.
func TestTrackerPausesThrottlesAndRestores(t *testing.T) {
	tr, buf := newTracker(t, "")
	key := []byte("desktop|https://shop.test/p/1")
	h := shm.HostHash([]byte("shop.test"))
	table := tr.Seg.Hosts()

	if refused := tr.Observe(key, outcome.ServerError, 429, map[string]string{"retry-after": "2"}, t0); !refused {
		t.Fatal("a 429 is not a refusal")
	}
	st, ok := table.Load(h)
	if limit, paused := allowance(st, 4, t0+1999); !ok || !paused || limit != 4 || st.Host != "shop.test" {
		t.Fatalf("after a 429 with Retry-After 2: %+v %v", st, ok)
	}
	if _, paused := allowance(st, 4, t0+2000); paused {
		t.Fatal("still paused when Retry-After has passed")
	}
	wantLog(t, buf, "host paused", map[string]any{"host": "shop.test", "cause": "retry_after", "status": 429.0, "limit": 4.0,
		"paused_until": "2027-01-15T08:00:02.000Z"})

	// After the pause: errors. The first is the host's first result since its pause passed, so
	// it says the host is restored; the second changes nothing an operator sees.
	for i := range 3 {
		if tr.Observe(key, outcome.ServerError, 500, nil, t0+3000+int64(i)) {
			t.Fatal("a 500 is a refusal")
		}
		switch i {
		case 0:
			wantLog(t, buf, "host restored", map[string]any{"host": "shop.test", "limit": 4.0})
		case 1:
			if buf.Len() != 0 {
				t.Fatalf("logged on the second error: %s", buf)
			}
		}
	}
	st, _ = table.Load(h)
	if limit, paused := allowance(st, 4, t0+3003); paused || limit != 2 {
		t.Fatalf("after three 500s: %+v", st)
	}
	wantLog(t, buf, "host throttled", map[string]any{"host": "shop.test", "cause": "errors", "status": 500.0, "limit": 2.0})

	for i := range 20 {
		tr.Observe(key, outcome.OK, 200, nil, t0+4000+int64(i))
		if i == 9 {
			wantLog(t, buf, "host throttled", map[string]any{"limit": 3.0})
		}
	}
	if st, ok := table.Load(h); ok {
		t.Fatalf("back at the maximum, the host is still in the table: %+v", st)
	}
	wantLog(t, buf, "host restored", map[string]any{"host": "shop.test", "cause": "none", "limit": 4.0})
	if buf.Len() != 0 {
		t.Fatalf("more lines: %s", buf)
	}
}

// Observe counts by site: every port and subdomain of a render.domains entry is that entry's
// (an override naming one of its ports is the site's), a host no entry names is its own site
// without its port, and other sites are left alone; a key with no host changes nothing.
func TestTrackerCountsBySiteAndItsOverride(t *testing.T) {
	tr, buf := newTracker(t, "render:\n  domains: [shop.test]\n  hosts:\n    overrides: {\"shop.test:8080\": 2}\n")
	for i, key := range []string{"mobile|http://shop.test:8080/a", "desktop|http://www.shop.test:9090/b", "desktop|https://shop.test/c"} {
		tr.Observe([]byte(key), outcome.Timeout, 0, nil, t0+int64(i))
	}
	st, ok := tr.Seg.Hosts().Load(shm.HostHash([]byte("shop.test")))
	if limit, _ := allowance(st, 2, t0); !ok || limit != 1 || st.Host != "shop.test" {
		t.Fatalf("the site's override 2 halved by three timeouts of its ports and subdomain: %+v %v", st, ok)
	}
	wantLog(t, buf, "host throttled", map[string]any{"host": "shop.test", "limit": 1.0, "status": 0.0})
	for _, other := range []string{"shop.test:8080", "www.shop.test:9090", "www.shop.test"} {
		if _, ok := tr.Seg.Hosts().Load(shm.HostHash([]byte(other))); ok {
			t.Fatalf("%s, a spelling of the site, has an entry of its own", other)
		}
	}
	for i := range 3 {
		tr.Observe([]byte("desktop|http://other.test:81/x"), outcome.Timeout, 0, nil, t0+10+int64(i))
	}
	if st, ok := tr.Seg.Hosts().Load(shm.HostHash([]byte("other.test"))); !ok || st.Host != "other.test" {
		t.Fatalf("a host no entry names is its own site without its port: %+v %v", st, ok)
	}
	tr.Observe([]byte("desktop|no-authority"), outcome.ServerError, 429, nil, t0)
	if n := len(tr.Seg.Hosts().Snapshot()); n != 2 {
		t.Fatalf("%d hosts in the table, want 2", n)
	}
}

// A pause that has passed is cleaned up by the host's next result, whatever it says, and
// logged as restored.
func TestTrackerDeletesAPassedPause(t *testing.T) {
	tr, buf := newTracker(t, "")
	key := []byte("desktop|https://a.test/")
	tr.Observe(key, outcome.ServerError, 503, map[string]string{"retry-after": "1"}, t0)
	wantLog(t, buf, "host paused", nil)
	tr.Observe(key, outcome.Network, 0, nil, t0+1000)
	if st, ok := tr.Seg.Hosts().Load(shm.HostHash([]byte("a.test"))); ok {
		t.Fatalf("still in the table: %+v", st)
	}
	wantLog(t, buf, "host restored", map[string]any{"host": "a.test"})
}

// A longer Retry-After during a pause extends it, which is logged; a shorter one changes
// nothing, and is not.
func TestTrackerLogsAnExtendedPauseOnly(t *testing.T) {
	tr, buf := newTracker(t, "")
	key := []byte("desktop|https://a.test/")
	tr.Observe(key, outcome.ServerError, 429, map[string]string{"retry-after": "10"}, t0)
	wantLog(t, buf, "host paused", nil)
	tr.Observe(key, outcome.ServerError, 429, map[string]string{"retry-after": "5"}, t0+1)
	if buf.Len() != 0 {
		t.Fatalf("a shorter Retry-After logged: %s", buf)
	}
	tr.Observe(key, outcome.ServerError, 503, map[string]string{"retry-after": "60"}, t0+2)
	wantLog(t, buf, "host paused", map[string]any{"status": 503.0, "paused_until": "2027-01-15T08:01:00.002Z"})
}

// An error streak short of halve_after stays out of the shared table (it could evict a host
// the farm must hold back), yet counts: the third 500 halves the limit, and a success forgets
// a streak.
func TestTrackerKeepsErrorStreaksOutOfTheTable(t *testing.T) {
	tr, _ := newTracker(t, "")
	key := []byte("desktop|https://a.test/")
	for i := range 2 {
		tr.Observe(key, outcome.ServerError, 500, nil, t0+int64(i))
		if n := len(tr.Seg.Hosts().Snapshot()); n != 0 {
			t.Fatalf("after %d errors: %d hosts in the table, want 0", i+1, n)
		}
	}
	tr.Observe(key, outcome.ServerError, 502, nil, t0+2)
	if st, ok := tr.Seg.Hosts().Load(shm.HostHash([]byte("a.test"))); !ok || st.Limit != 2 || st.ErrStreak != 0 {
		t.Fatalf("after three errors: %+v %v, want limit 2", st, ok)
	}
	other := []byte("desktop|https://b.test/")
	tr.Observe(other, outcome.Timeout, 0, nil, t0)
	tr.Observe(other, outcome.OK, 200, nil, t0+1)
	tr.Observe(other, outcome.Timeout, 0, nil, t0+2)
	tr.Observe(other, outcome.Timeout, 0, nil, t0+3)
	if _, ok := tr.Seg.Hosts().Load(shm.HostHash([]byte("b.test"))); ok {
		t.Fatal("a streak broken by a success still counted")
	}
	if len(tr.streaks) != 1 || tr.streaks[shm.HostHash([]byte("b.test"))].ErrStreak != 2 {
		t.Fatalf("remembered streaks %+v", tr.streaks)
	}
}

// The memory of streaks is bounded.
func TestTrackerStreakMemoryIsBounded(t *testing.T) {
	tr, _ := newTracker(t, "")
	for i := range maxStreaks + 10 {
		tr.Observe([]byte(fmt.Sprintf("desktop|https://h%d.test/", i)), outcome.ServerError, 500, nil, t0)
		if len(tr.streaks) > maxStreaks {
			t.Fatalf("%d streaks remembered, at most %d", len(tr.streaks), maxStreaks)
		}
	}
}

// Results of one host applied at once (batches of different keys run concurrently in worker
// 0) lose no count: each read-Step-write of a host is one step.
func TestTrackerObserveLosesNoConcurrentResult(t *testing.T) {
	tr, _ := newTracker(t, "render:\n  hosts:\n    halve_after: 1000000\n")
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tr.Observe([]byte(fmt.Sprintf("desktop|https://a.test/%d/%d", g, i)), outcome.ServerError, 500, nil, t0)
			}
		}()
	}
	wg.Wait()
	if got := tr.streaks[shm.HostHash([]byte("a.test"))].ErrStreak; got != goroutines*each {
		t.Fatalf("error streak %d after %d errors", got, goroutines*each)
	}
}

// allowance is Allow's limit and pause for a state the table holds.
func allowance(st shm.HostState, maxInFlight int, nowMs int64) (limit int, paused bool) {
	a := Allow(st.Hash, st, true, maxInFlight, Membership{}, nowMs)
	return a.Limit, a.Paused
}
