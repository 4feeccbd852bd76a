package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/cmd/freshqctl/top"
	"github.com/freshq/freshq/wire"
)

// hostsQueue is a /v1/queue answer whose host table holds, in the server's order (the most held
// back first): shop.example paused 1m20s more by a 429, api.example limited to 1 of 4 by 5xx
// with one render in flight, slow.example to 2 of 4 by timeouts, ten more paused hosts, and
// ok.example back at its maximum (in the table for its streaks: not held back).
func hostsQueue(now time.Time) []byte {
	until := now.Add(80 * time.Second).UnixMilli()
	hosts := []wire.QueueHost{
		{Host: "shop.example", Paused: true, PausedUntilMs: until, Limit: 4, Max: 4, Cause: "retry_after", Status: 429},
		{Host: "api.example", Limit: 1, Max: 4, InFlight: 1, Cause: "errors", Status: 503},
		{Host: "slow.example", Limit: 2, Max: 4, Cause: "errors"},
	}
	for i := range 10 {
		hosts = append(hosts, wire.QueueHost{Host: fmt.Sprintf("p%02d.example", i), Paused: true, PausedUntilMs: until, Limit: 4, Max: 4, Cause: "retry_after", Status: 503})
	}
	hosts = append(hosts, wire.QueueHost{Host: "ok.example", Limit: 4, Max: 4, Cause: "errors", Status: 500})
	v := wire.QueueView{Hosts: hosts, HostsTracked: len(hosts), HostEvictions: 3}
	body, _ := json.Marshal(v)
	return body
}

// TestTopShowsHosts: top lists the hosts held back with how and why — paused and the pause
// left with the answer that paused it, or the lowered limit of max and the errors that lowered
// it — at most 10 of them, then how many more; a host at its maximum is not listed.
func TestTopShowsHosts(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{
		"GET /metrics":  func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, metricsText(1000, 100)) },
		"GET /v1/queue": func(w http.ResponseWriter, r *http.Request) { w.Write(hostsQueue(time.Now())) },
	})
	r := at(t, f.srv, "top", "--once")
	wantExit(t, r, 0, "")
	for _, want := range []string{
		"\nHOSTS held back: 13\n",
		"shop.example                 paused 1m20s     (429 Retry-After)  0 in flight\n",
		"api.example                  limit 1/4        (5xx)              1 in flight\n",
		"slow.example                 limit 2/4        (timeouts)         0 in flight\n",
		"p06.example                  paused 1m20s     (503 Retry-After)  0 in flight\n",
		"… and 3 more (freshqctl queue --json lists them)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("top --once lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, not := range []string{"p07.example", "ok.example"} {
		if strings.Contains(r.stdout, not) {
			t.Fatalf("top --once lists %s:\n%s", not, r.stdout)
		}
	}
	fits(t, r.stdout)
	r = at(t, f.srv, "top", "--once", "--json")
	var fr top.Frame
	if err := json.Unmarshal([]byte(r.stdout), &fr); err != nil || len(fr.Hosts) != 10 || fr.HostsHeld != 13 || fr.Hosts[1].Host != "api.example" {
		t.Fatalf("--json %q: %v", r.stdout, err)
	}
}

// TestTopWithoutHosts: no host held back, no hosts block.
func TestTopWithoutHosts(t *testing.T) {
	body, _ := json.Marshal(wire.QueueView{Hosts: []wire.QueueHost{{Host: "ok.example", Limit: 4, Max: 4}}, HostsTracked: 1})
	f := newFake(t, map[string]http.HandlerFunc{
		"GET /metrics":  func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, metricsText(1000, 100)) },
		"GET /v1/queue": func(w http.ResponseWriter, r *http.Request) { w.Write(body) },
	})
	r := at(t, f.srv, "top", "--once")
	wantExit(t, r, 0, "")
	if strings.Contains(r.stdout, "HOSTS") || strings.Contains(r.stdout, "ok.example") {
		t.Fatalf("top --once:\n%s", r.stdout)
	}
}

// TestQueueShowsHosts: freshqctl queue counts the host table and lists every host held back.
func TestQueueShowsHosts(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{
		"GET /v1/queue": func(w http.ResponseWriter, r *http.Request) { w.Write(hostsQueue(time.Now())) },
	})
	r := at(t, f.srv, "queue")
	wantExit(t, r, 0, "")
	for _, want := range []string{"HOSTS   14 in the host table, 3 evicted from it\n", "\nHOSTS held back: 13\n",
		"shop.example                 paused 1m20s     (429 Retry-After)  0 in flight\n", "p09.example "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("queue lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "ok.example") || strings.Contains(r.stdout, "more") {
		t.Fatalf("queue:\n%s", r.stdout)
	}
}
