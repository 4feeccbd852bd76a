package fuzz

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/wire"
)

// FuzzHostView stores arbitrary host states in a host table — any name, times far outside the
// clock's, any limit, cause and status, as a corrupt or future writer could leave them — and
// reads them as /v1/queue's hosts section and the host metrics do (hosts.Rows): never a
// panic; the view encodes as JSON (a time JSON cannot carry is left out, not the answer);
// every row's limit is between 1 and its maximum, paused exactly while the pause has not
// ended; and the rows are in hosts.Compare's order.
func FuzzHostView(f *testing.F) {
	seg, err := shm.Create(filepath.Join(f.TempDir(), "seg"), shm.Options{Workers: 2, HostCapacity: 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { seg.Close() })
	const now = int64(1_800_000_000_000)
	f.Add("shop.example", now+80_000, now-1000, uint32(0), uint16(429), uint8(1), uint16(4), now)
	f.Add("api.example:8443", int64(0), now, uint32(1), uint16(503), uint8(2), uint16(4), now)
	f.Add("", int64(math.MaxInt64), int64(math.MinInt64), uint32(math.MaxUint32), uint16(0), uint8(255), uint16(0), int64(-1))
	f.Add(string(make([]byte, 400)), int64(-62135596800001), int64(253402300800000), uint32(9), uint16(200), uint8(0), uint16(1023), now)
	f.Fuzz(func(t *testing.T, host string, pausedUntil, since int64, limit uint32, status uint16, cause uint8, maxRaw uint16, nowMs int64) {
		states := []shm.HostState{
			{Host: host, PausedUntilMs: pausedUntil, Limit: limit, SinceMs: since, Cause: shm.HostCause(cause), Status: status},
			{Host: host + ".b", PausedUntilMs: nowMs, Limit: limit / 2, SinceMs: nowMs},
			{Host: host + ".c", PausedUntilMs: pausedUntil / 2, Limit: 1, SinceMs: since / 3, Cause: shm.HostCauseErrors},
		}
		for _, st := range states {
			seg.Hosts().Store(st)
		}
		defer func() {
			for _, h := range seg.Hosts().Snapshot() {
				seg.Hosts().Delete(h.Hash)
			}
		}()
		maxOf := func(h []byte) int { return 1 + (int(maxRaw)+len(h))%hosts.MaxTokens }
		rows := hosts.Rows(seg, maxOf, nowMs)
		if _, err := json.Marshal(wire.QueueView{Hosts: rows, HostsTracked: len(rows)}); err != nil {
			t.Fatalf("the hosts section does not encode: %v", err)
		}
		for i, r := range rows {
			if r.Limit < 1 || r.Limit > r.Max || r.Max != maxOf([]byte(r.Host)) {
				t.Fatalf("%q: limit %d of max %d", r.Host, r.Limit, r.Max)
			}
			if r.Paused != (nowMs < r.PausedUntilMs) {
				t.Fatalf("%q: paused %v, until %d, now %d", r.Host, r.Paused, r.PausedUntilMs, nowMs)
			}
			if i > 0 && hosts.Compare(rows[i-1], r) > 0 {
				t.Fatalf("out of order: %+v before %+v", rows[i-1], r)
			}
		}
	})
}
