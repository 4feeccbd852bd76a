package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// TestQueueHosts: /v1/queue lists every host of the host table with its pause, its effective
// limit under its configured maximum (an override included), its renders in flight (host
// tokens held), why and since when, the most held back first: the longest pause, then the
// shorter one, then the lowest limit ÷ max, and a host whose pause has ended last.
func TestQueueHosts(t *testing.T) {
	const now = int64(1_800_000_000_000)
	e := qtest.New(t, "render:\n  hosts:\n    overrides:\n      slow.example: 10\n", now, shm.Options{})
	h := e.Seg.Hosts()
	h.Store(shm.HostState{Host: "short.example", PausedUntilMs: now + 10_000, Cause: shm.HostCauseRetryAfter, Status: 503, SinceMs: now - 2000})
	h.Store(shm.HostState{Host: "shop.example", PausedUntilMs: now + 80_250, Cause: shm.HostCauseRetryAfter, Status: 429, SinceMs: now - 1000})
	h.Store(shm.HostState{Host: "api.example", Limit: 1, ErrStreak: 3, Cause: shm.HostCauseErrors, Status: 502, SinceMs: now - 5000})
	h.Store(shm.HostState{Host: "slow.example", Limit: 2, Cause: shm.HostCauseErrors, SinceMs: now - 6000})
	h.Store(shm.HostState{Host: "over.example", PausedUntilMs: now - 1, Cause: shm.HostCauseRetryAfter, Status: 429, SinceMs: now - 9000})
	for i := range 2 { // two renders of api.example in flight, granted before its limit fell
		if _, ok := hosts.AdmitToken(e.Seg.Leases(), shm.HostHash([]byte("api.example")), 4, uint64(i), now, 60_000, 7); !ok {
			t.Fatal("no host token")
		}
	}
	mux := http.NewServeMux()
	(&Queue{Seg: e.Seg, Now: e.Now, Settings: qtest.Settings(e, IntakeSettingsOf)}).Register(mux)
	var q wire.QueueView
	if code := getJSON(t, mux, "/v1/queue", &q); code != http.StatusOK {
		t.Fatal(code)
	}
	var got []string
	for _, r := range q.Hosts {
		got = append(got, fmt.Sprintf("%s paused=%v %d/%d in_flight=%d %s %d since=%d", r.Host, r.Paused, r.Limit, r.Max, r.InFlight, r.Cause, r.Status, now-r.SinceMs))
	}
	want := []string{
		"shop.example paused=true 4/4 in_flight=0 retry_after 429 since=1000",
		"short.example paused=true 4/4 in_flight=0 retry_after 503 since=2000",
		"slow.example paused=false 2/10 in_flight=0 errors 0 since=6000",
		"api.example paused=false 1/4 in_flight=2 errors 502 since=5000",
		"over.example paused=false 4/4 in_flight=0 retry_after 429 since=9000",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("hosts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if q.HostsTracked != 5 || q.HostEvictions != 0 {
		t.Fatalf("tracked %d, evictions %d", q.HostsTracked, q.HostEvictions)
	}
	// The times are RFC 3339 with their milliseconds, and in ms beside; a host never paused
	// has no paused_until.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/queue", nil))
	var raw struct {
		Hosts []map[string]any `json:"hosts"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	s := raw.Hosts[0]
	until, err := time.Parse(time.RFC3339, fmt.Sprint(s["paused_until"]))
	if err != nil || until.UnixMilli() != now+80_250 || s["paused_until_ms"] != float64(now+80_250) || s["since_ms"] != float64(now-1000) {
		t.Fatalf("shop.example: %v (%v)", s, err)
	}
	if _, ok := raw.Hosts[3]["paused_until"]; ok {
		t.Fatalf("api.example was never paused: %v", raw.Hosts[3])
	}
}

// TestQueueHostsEvictions: a full host table's evictions are counted in /v1/queue, and an
// empty table answers an empty list, not null.
func TestQueueHostsEvictions(t *testing.T) {
	const now = int64(1_800_000_000_000)
	e := qtest.New(t, "", now, shm.Options{HostCapacity: 16})
	mux := http.NewServeMux()
	(&Queue{Seg: e.Seg, Now: e.Now}).Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/queue", nil))
	if !strings.Contains(rec.Body.String(), `"hosts":[],"hosts_tracked":0,"host_evictions":0`) {
		t.Fatalf("empty table: %s", rec.Body)
	}
	for i := range 18 {
		e.Seg.Hosts().Store(shm.HostState{Host: fmt.Sprintf("h%d.example", i), PausedUntilMs: now + int64(i+1)*1000})
	}
	var q wire.QueueView
	getJSON(t, mux, "/v1/queue", &q)
	if q.HostsTracked != 16 || len(q.Hosts) != 16 || q.HostEvictions != 2 {
		t.Fatalf("tracked %d (%d listed), evictions %d", q.HostsTracked, len(q.Hosts), q.HostEvictions)
	}
}
