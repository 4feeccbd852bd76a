package claim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// politeness is a configuration whose hosts have 2 renders in flight at most, one of them 1.
const politeness = routes + `
render:
  hosts:
    max_concurrency: 2
    overrides: {"one.test": 1}
`

// putHosts files rows of each host, all due an hour ago, and returns nothing: keys are
// desktop|https://<host>/c/<i>.
func (n *node) putHosts(perHost int, hosts ...string) {
	for _, h := range hosts {
		for i := range perHost {
			n.Put(fmt.Sprintf("desktop|https://%s/c/%d", h, i), start-hour-int64(i), true, 0, store.Lanes{})
		}
	}
}

func hostsOf(jobs []Job) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[string(cachekey.Host(j.Key))]++
	}
	return out
}

// A host at its limit is passed over at take, on the ready path and the index path alike, and
// the hosts behind it are served: the limit is per host, across every claimer of the node.
func TestClaimKeepsEachHostWithinItsLimit(t *testing.T) {
	for _, ready := range []bool{true, false} {
		t.Run(fmt.Sprintf("ready=%v", ready), func(t *testing.T) {
			yaml := politeness
			if !ready {
				yaml += "queue:\n  ready: {enabled: false}\n"
			}
			n := newNode(t, yaml)
			n.putHosts(10, "big.test", "one.test", "b.test", "c.test")
			n.sweep()
			a, b := n.claimer(1), n.claimer(2)
			var jobs []Job
			for range 5 { // two workers, small claims, as render workers claim
				for _, c := range []*Claimer{a, b} {
					got, err := c.Claim(context.Background(), 2)
					if err != nil {
						t.Fatal(err)
					}
					jobs = append(jobs, got...)
				}
			}
			got := hostsOf(jobs)
			want := map[string]int{"big.test": 2, "one.test": 1, "b.test": 2, "c.test": 2}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("granted per host %v, want %v", got, want)
			}
			leases := n.Seg.Leases()
			for h, w := range want {
				if in := hosts.InFlight(leases, shm.HostHash([]byte(h)), 4, n.Now()); in != w {
					t.Errorf("%s: %d host slots held, want %d", h, in, w)
				}
			}
			w1, _ := n.Seg.Worker(1)
			w2, _ := n.Seg.Worker(2)
			refused := w1.Load(shm.CounterRenderRefusedHost) + w2.Load(shm.CounterRenderRefusedHost) +
				n.Worker0.Load(shm.CounterRenderRefusedHost)
			if ready && refused == 0 {
				t.Error("no take was counted as refused for its host")
			}
			// A refused row is not leased: it is still due, and only its host holds it back.
			for i := range 10 {
				key := fmt.Sprintf("desktop|https://big.test/c/%d", i)
				info, held := leases.Lookup(shm.KeyHash([]byte(key)), n.Now())
				granted := false
				for _, j := range jobs {
					granted = granted || string(j.Key) == key
				}
				if held != granted {
					t.Fatalf("%s: leased %v (%+v), granted %v", key, held, info, granted)
				}
			}
			// A render that ends gives its host slot back: the host's next row is granted.
			var big Job
			for _, j := range jobs {
				if strings.Contains(string(j.Key), "big.test") {
					big = j
				}
			}
			big.ReleaseHost(leases, n.Now())
			n.complete(big)
			n.sweep()
			more, err := a.Claim(context.Background(), 8)
			if err != nil {
				t.Fatal(err)
			}
			if got := hostsOf(more); got["big.test"] != 1 || got["one.test"] != 0 {
				t.Fatalf("after one big.test render ended: granted %v, want one more big.test and no one.test", got)
			}
		})
	}
}

// A paused host gets nothing until its pause ends, from either path; its rows stay due and
// unleased, and no other host is held back.
func TestClaimGrantsNothingOfAPausedHost(t *testing.T) {
	n := newNode(t, politeness)
	n.putHosts(3, "big.test", "b.test")
	n.Seg.Hosts().Store(shm.HostState{Host: "big.test", PausedUntilMs: start + 2000, SinceMs: start,
		Cause: shm.HostCauseRetryAfter, Status: 429})
	n.sweep()
	jobs, err := n.claimer(1).Claim(context.Background(), 8)
	if err != nil {
		t.Fatal(err)
	}
	if got := hostsOf(jobs); got["big.test"] != 0 || got["b.test"] != 2 {
		t.Fatalf("while big.test is paused: granted %v", got)
	}
	if idx, err := n.index.ClaimIndex(context.Background(), IndexClaim{N: 8, Holder: 9}); err != nil || len(idx) != 0 {
		t.Fatalf("index claim while paused: %d jobs (%v), %v; want none and no error", len(idx), hostsOf(idx), err)
	}
	n.Advance(2000)
	idx, err := n.index.ClaimIndex(context.Background(), IndexClaim{N: 8, Holder: 9})
	if err != nil || hostsOf(idx)["big.test"] != 2 {
		t.Fatalf("index claim after the pause: %v, %v; want 2 of big.test", hostsOf(idx), err)
	}
}

// A limit lowered by the host's errors (the host table's Limit) binds below the configured
// maximum, and never raises it.
func TestClaimHonoursALoweredLimit(t *testing.T) {
	n := newNode(t, politeness)
	n.putHosts(5, "big.test")
	n.Seg.Hosts().Store(shm.HostState{Host: "big.test", Limit: 1, Cause: shm.HostCauseErrors, Status: 503})
	n.Seg.Hosts().Store(shm.HostState{Host: "one.test", Limit: 9, Cause: shm.HostCauseErrors})
	n.putHosts(5, "one.test")
	n.sweep()
	jobs, err := n.claimer(1).Claim(context.Background(), 8)
	if err != nil {
		t.Fatal(err)
	}
	if got := hostsOf(jobs); got["big.test"] != 1 || got["one.test"] != 1 {
		t.Fatalf("granted %v, want 1 of each", got)
	}
}

// A set of one host that is full is not eaten by one claim: the claim passes over at most
// maxHostRefusals entries, and does not scan the index for rows of the same host.
func TestClaimOfAFullHostStopsEarly(t *testing.T) {
	n := newNode(t, politeness)
	n.putHosts(100, "big.test")
	n.sweep()
	c := n.claimer(1)
	held, err := c.Claim(context.Background(), 2) // both of big.test's slots
	if err != nil || len(held) != 2 {
		t.Fatalf("first claim: %d jobs, %v", len(held), err)
	}
	before := n.Seg.Ready().Stats().Taken
	scans := n.scanner.scans.Load()
	jobs, err := c.Claim(context.Background(), 1)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("a claim while big.test is full: %d jobs, %v", len(jobs), err)
	}
	if taken := n.Seg.Ready().Stats().Taken - before; taken != maxHostRefusals {
		t.Fatalf("the claim consumed %d entries, want %d", taken, maxHostRefusals)
	}
	if s := n.scanner.scans.Load(); s != scans {
		t.Fatalf("the claim scanned the index %d times for rows of a full host", s-scans)
	}
}
