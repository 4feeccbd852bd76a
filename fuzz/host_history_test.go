package fuzz

import (
	"errors"
	"fmt"
	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/assemble/settings"
	"github.com/freshq/freshq/testkit/intaketest"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// The host history test runs worker 0's Applier, with its host Tracker over a small host table
// (32 slots), from several goroutines at once on a manual clock: results of grants held (200s,
// 429s with a short Retry-After, 503s, timeouts) on a few genuine hosts, and hostile ones that
// the lease check must fence: duplicates of delivered results, results of grants revoked (as a
// delete or rush does) or lapsed, and results with forged leases naming flood hosts, many more
// than the table holds. Each of those asks for the longest pause (Retry-After: 600). Each
// delivery records what it sent, its clock at start and end, and what it was answered; the
// checker then proves, whatever the interleaving was:
//
//	H1 every duplicate, revoked, lapsed or forged result was fenced;
//	H2 no host is in the table, or was evicted from it, but by a result whose lease held: no
//	   flood host is there, and the table evicted nothing (the genuine hosts fit);
//	H3 a host's pause ends no later than the latest its accepted refusals asked for (clock at
//	   their end + Retry-After), and a host is throttled only if an accepted result of it failed;
//	H4 a host whose accepted refusal asked for a pause still running at the end is paused in the
//	   table at least that long: never evicted, never shortened.

const (
	hostHistoryGenuine = 4
	hostHistoryFlood   = 200
	hostHistoryTTL     = 20_000 // ms, each grant's lease
	hostHistoryYAML    = "render:\n  hosts: {max_concurrency: 4, halve_after: 2, grow_after: 3, max_pause: 10m}\n"
)

type hostKind uint8

const (
	hkHeld      hostKind = iota // a result of a grant held
	hkDuplicate                 // a result delivered before, again
	hkRevoked                   // a grant released before its result (a delete, a rush)
	hkLapsed                    // a grant whose lease lapsed before its result
	hkForged                    // a lease never granted, on a flood host's key
)

type hostDelivery struct {
	kind           hostKind
	host           string
	status         int
	outcome        string
	retryAfterSec  int
	clock0, clock1 int64
	fenced         bool
}

type hostRun struct {
	e       *qtest.Env
	applier *apply.Applier
	mu      sync.Mutex
	log     []hostDelivery
	errs    []string
}

func (r *hostRun) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

func genuineKey(i int) []byte {
	return []byte(fmt.Sprintf("desktop|https://g%d.test/p/%d", i%hostHistoryGenuine, i))
}

// deliver applies one result through Deliver, as POST /v1/results does, and records it.
func (r *hostRun) deliver(d hostDelivery, res wire.Result) {
	if d.retryAfterSec > 0 {
		res.Headers = map[string]string{"retry-after": fmt.Sprint(d.retryAfterSec)}
	}
	res.Outcome, res.Status = d.outcome, d.status
	d.clock0 = r.e.Now()
	st, err := r.applier.Deliver([]wire.Result{res})
	d.clock1 = r.e.Now()
	switch {
	case err == nil:
		d.fenced = st.Fenced == 1
	case errors.As(err, new(*intake.FencedError)):
		d.fenced = true
	default:
		r.fail("%s of %s: %v", d.outcomeName(), d.host, err)
		return
	}
	r.mu.Lock()
	r.log = append(r.log, d)
	r.mu.Unlock()
}

func (d hostDelivery) outcomeName() string { return fmt.Sprintf("%s %d", d.outcome, d.status) }

// play runs one goroutine's program of n steps.
func (r *hostRun) play(rng *rand.Rand, n int) {
	leases := r.e.Seg.Leases()
	var delivered []wire.Result
	for range n {
		step := rng.IntN(10)
		switch {
		case step < 5: // a render of a genuine host, delivered
			key := genuineKey(rng.IntN(64))
			l, st := leases.Acquire(shm.KeyHash(key), r.e.Now(), hostHistoryTTL, 1)
			if st != shm.Acquired {
				continue
			}
			res := wire.Result{Key: key, Lease: wire.Lease{Slot: l.Slot, State: l.State, KeyHash: l.KeyHash}}
			d := hostDelivery{kind: hkHeld, host: hostOf(key)}
			switch rng.IntN(4) {
			case 0:
				d.outcome, d.status = "ok", 200
				res.Body = []byte("<html></html>")
			case 1:
				d.outcome, d.status, d.retryAfterSec = "server_error", 429, 1+rng.IntN(30)
			case 2:
				d.outcome, d.status = "server_error", 503
			case 3:
				d.outcome = "timeout"
			}
			switch rng.IntN(6) {
			case 0:
				leases.Release(l, r.e.Now(), 0) // revoked before its result
				d.kind = hkRevoked
			case 1:
				r.e.Advance(hostHistoryTTL) // lapsed before its result
				d.kind = hkLapsed
			}
			if d.kind != hkHeld && d.status == 200 {
				d.outcome, d.status, d.retryAfterSec = "server_error", 429, 600
			}
			r.deliver(d, res)
			delivered = append(delivered, res)
		case step < 7 && len(delivered) > 0: // a duplicate, asking for the longest pause
			res := delivered[rng.IntN(len(delivered))]
			r.deliver(hostDelivery{kind: hkDuplicate, host: hostOf(res.Key), outcome: "server_error", status: 429, retryAfterSec: 600}, res)
		case step < 9: // a forged lease on a flood host's key
			key := []byte(fmt.Sprintf("desktop|https://f%d.flood.test/", rng.IntN(hostHistoryFlood)))
			res := wire.Result{Key: key, Lease: wire.Lease{Slot: uint32(rng.IntN(64)), State: rng.Uint64() | 1, KeyHash: shm.KeyHash(key)}}
			r.deliver(hostDelivery{kind: hkForged, host: hostOf(key), outcome: "server_error", status: 429, retryAfterSec: 600}, res)
		default:
			r.e.Advance(int64(rng.IntN(3000)))
		}
	}
}

func hostOf(key []byte) string {
	var host string
	fmt.Sscanf(string(key), "desktop|https://%s", &host)
	for i := range host {
		if host[i] == '/' {
			return host[:i]
		}
	}
	return host
}

// checkHostHistory proves H1-H4 over the deliveries and the table at the end.
func checkHostHistory(log []hostDelivery, table *shm.Hosts, end int64) []string {
	var bad []string
	latest := map[string]int64{} // host → the latest end of a pause its accepted refusals asked
	failed := map[string]bool{}  // host → an accepted result of it failed
	for _, d := range log {
		if d.kind != hkHeld && !d.fenced {
			bad = append(bad, fmt.Sprintf("H1: a %v result (%s of %s) was accepted", d.kind, d.outcomeName(), d.host))
		}
		if d.fenced {
			continue
		}
		if d.status == 429 {
			latest[d.host] = max(latest[d.host], d.clock1+int64(max(d.retryAfterSec, 1))*1000)
		}
		if d.status != 200 {
			failed[d.host] = true
		}
	}
	inTable := map[string]shm.HostState{}
	for _, st := range table.Snapshot() {
		inTable[st.Host] = st
		_, refused := latest[st.Host]
		switch {
		case !refused && !failed[st.Host]:
			bad = append(bad, fmt.Sprintf("H2: %s is in the table, and no result of it whose lease held failed: %+v", st.Host, st))
		case st.PausedUntilMs > latest[st.Host]:
			bad = append(bad, fmt.Sprintf("H3: %s is paused until %d, later than its accepted refusals asked (%d)", st.Host, st.PausedUntilMs, latest[st.Host]))
		case st.Limit != 0 && !failed[st.Host]:
			bad = append(bad, fmt.Sprintf("H3: %s is throttled, and no accepted result of it failed", st.Host))
		}
	}
	if ev := table.Stats().Evictions; ev != 0 {
		bad = append(bad, fmt.Sprintf("H2: the table evicted %d hosts; only %d hosts had results whose lease held", ev, hostHistoryGenuine))
	}
	for _, d := range log {
		if d.fenced || d.status != 429 {
			continue
		}
		asked := d.clock0 + int64(d.retryAfterSec)*1000
		if asked <= end {
			continue
		}
		if st, ok := inTable[d.host]; !ok || st.PausedUntilMs < asked {
			bad = append(bad, fmt.Sprintf("H4: %s asked at %d for a pause until %d; the table has %+v (%v)", d.host, d.clock0, asked, st, ok))
		}
	}
	return bad
}

func runHostHistory(t *testing.T, seed uint64) {
	e := qtest.New(t, hostHistoryYAML, fenceStartMs, shm.Options{LeaseCapacity: 64, LeaseWindow: 8, HostCapacity: 32})
	r := &hostRun{e: e, applier: intaketest.Applier(t, apply.ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: qtest.Settings(e, settings.IntakeSettings), Now: e.Now,
		Log: qtest.Log(nil), Hosts: &hosts.Tracker{Seg: e.Seg, Limits: func() *hosts.Limits { return &qtest.Settings(e, settings.IntakeSettings)().Hosts }, Log: zerolog.Nop()}})}
	var wg sync.WaitGroup
	for g := range 4 {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() { r.play(rng, 150) })
	}
	wg.Wait()
	bad := append(r.errs, checkHostHistory(r.log, e.Seg.Hosts(), e.Now())...)
	fenced := 0
	for _, d := range r.log {
		if d.fenced {
			fenced++
		}
	}
	if fenced == 0 || fenced == len(r.log) {
		bad = append(bad, fmt.Sprintf("a history of %d deliveries with %d fenced proves nothing", len(r.log), fenced))
	}
	for i, b := range bad {
		if i == 10 {
			break
		}
		t.Error(b)
	}
}

// TestHostFenceHistory runs a few seeds of the host history.
func TestHostFenceHistory(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runHostHistory(t, seed) })
	}
}

// FuzzHostFenceHistory runs the host history for any seed.
func FuzzHostFenceHistory(f *testing.F) {
	f.Add(uint64(7))
	f.Fuzz(func(t *testing.T, seed uint64) { runHostHistory(t, seed) })
}

func (k hostKind) String() string {
	return [...]string{"held", "duplicate", "revoked", "lapsed", "forged"}[k]
}
