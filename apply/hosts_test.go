package apply

import (
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// politeHosts states render.hosts at its defaults: qtest otherwise lifts the per-host limit
// (its package doc says why), and these tests are of politeness.
const politeHosts = "render:\n  hosts: {max_concurrency: 4}\n"

// politeApplier is an Applier whose results feed the host table, as worker 0's does.
func politeApplier(e *qtest.Env) *Applier {
	return newApplier(e.T, politeDeps(e))
}

func politeDeps(e *qtest.Env) ApplierDeps {
	set := qtest.Settings(e, IntakeSettingsOf)
	return ApplierDeps{Store: e.Store, Locks: &intake.KeyLocks{}, Seg: e.Seg, Settings: set, Now: e.Now,
		Hosts: &hosts.Tracker{Seg: e.Seg, Limits: func() *hosts.Limits { return &set().Hosts }, Log: zerolog.Nop()}}
}

// stored is everything the store holds of a key: its row, target and page.
type stored struct {
	row     store.Row
	target  store.Target
	page    store.Page
	hasPage bool
}

func readStored(t *testing.T, e *qtest.Env, key []byte) stored {
	t.Helper()
	row, err := e.Store.GetSchedule(key)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := e.Store.GetTarget(key)
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.Store.GetPage(key)
	return stored{row: row, target: tgt, page: page, hasPage: err == nil}
}

func applyOne(t *testing.T, e *qtest.Env, a *Applier, r wire.Result) wire.ApplyStats {
	t.Helper()
	r.Lease = grant(t, e, r.Key)
	st, err := a.Apply([]wire.Result{r})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func hostState(e *qtest.Env, host string) (shm.HostState, bool) {
	return e.Seg.Hosts().Load(shm.HostHash([]byte(host)))
}

// A 429 with Retry-After is the host's refusal, not the page's failure: the row keeps its due
// time, its target its failure count and last render, its page stays; the lease is released
// as after any result, and the host is paused in the shared table until the Retry-After.
func TestApplyHostRefusalLeavesTheRowAsItWas(t *testing.T) {
	e := qtest.New(t, politeHosts, start, shm.Options{})
	a := politeApplier(e)
	key := []byte("desktop|https://a.test/c/1")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	applyOne(t, e, a, wire.Result{Key: key, Outcome: "ok", Status: 200, Body: []byte("<html>v1</html>")})
	e.Advance(2 * hour)
	applyOne(t, e, a, wire.Result{Key: key, Outcome: "server_error", Status: 500})
	before := readStored(t, e, key)
	if before.target.Failures.Count != 1 || !before.hasPage {
		t.Fatalf("setup: %+v", before)
	}

	e.Advance(10_000) // past the release grace of the 500's lease
	st := applyOne(t, e, a, wire.Result{Key: key, Outcome: "server_error", Status: 429, Headers: map[string]string{"retry-after": "2"}})
	if st.HostRefused != 1 || st.Applied != 0 || st.Fenced != 0 || st.Skipped != 0 {
		t.Fatalf("stats %+v, want one host refusal", st)
	}
	if after := readStored(t, e, key); !reflect.DeepEqual(after, before) {
		t.Fatalf("the refusal changed what is stored:\nbefore %+v\nafter  %+v", before, after)
	}
	if info, ok := e.Seg.Leases().Lookup(shm.KeyHash(key), e.Now()); !ok || !info.Released {
		t.Fatalf("lease after the refusal: %+v %v, want released", info, ok)
	}
	hs, ok := hostState(e, "a.test")
	if !ok || hs.PausedUntilMs != e.Now()+2000 || hs.Cause != shm.HostCauseRetryAfter {
		t.Fatalf("host after the refusal: %+v %v, want paused until now+2s", hs, ok)
	}
}

// A 500 is the page's failure as before: a strike and a later due time; three of them, on any
// of the host's pages, halve the host's limit.
func TestApplyServerErrorStrikesAndThrottlesTheHost(t *testing.T) {
	e := qtest.New(t, politeHosts, start, shm.Options{})
	a := politeApplier(e)
	var keys [][]byte
	for _, p := range []string{"/a", "/b", "/c"} {
		key := []byte("desktop|https://b.test" + p)
		e.Put(string(key), start-hour, false, 0, store.Lanes{})
		keys = append(keys, key)
	}
	st := applyOne(t, e, a, wire.Result{Key: keys[0], Outcome: "server_error", Status: 500})
	got := readStored(t, e, keys[0])
	if st.Applied != 1 || st.HostRefused != 0 || got.target.Failures.Count != 1 || got.row.DueAtMs <= start-hour {
		t.Fatalf("a 500: %+v, stored %+v", st, got)
	}
	if hs, ok := hostState(e, "b.test"); ok {
		t.Fatalf("host after one 500: %+v, want it at its defaults in the table", hs)
	}
	for _, key := range keys[1:] {
		applyOne(t, e, a, wire.Result{Key: key, Outcome: "server_error", Status: 500})
	}
	hs, ok := hostState(e, "b.test")
	if limit, paused := allowance(hs, 4, e.Now()); !ok || limit != 2 || paused || hs.Cause != shm.HostCauseErrors {
		t.Fatalf("host after three 500s: %+v %v, want its limit halved to 2", hs, ok)
	}
}

// A fenced result changes nothing, host state included: anyone can post one, naming any host.
// A lapsed grant's 503 with Retry-After, a duplicate of an applied 429, and a forged lease on
// another host's key pause, throttle and evict nothing; the result whose lease held does.
func TestApplyFencedResultsLeaveTheirHostAlone(t *testing.T) {
	e := qtest.New(t, politeHosts, start, shm.Options{})
	a := politeApplier(e)
	key := []byte("desktop|https://c.test/x")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	l := grant(t, e, key)
	e.Seg.Leases().Release(intake.ShmLease(l), e.Now(), 0) // the grant is gone: the result is fenced
	st, err := a.Apply([]wire.Result{{Key: key, Outcome: "server_error", Status: 503, Headers: map[string]string{"retry-after": "30"}, Lease: l}})
	if err != nil || st.Fenced != 1 || st.HostRefused != 0 {
		t.Fatalf("%+v %v, want fenced", st, err)
	}
	if hs, ok := hostState(e, "c.test"); ok {
		t.Fatalf("host after a fenced 503 with Retry-After: %+v, want at its defaults", hs)
	}

	l = grant(t, e, key)
	refusal := wire.Result{Key: key, Outcome: "server_error", Status: 429, Headers: map[string]string{"retry-after": "5"}, Lease: l}
	if st, err := a.Apply([]wire.Result{refusal}); err != nil || st.HostRefused != 1 {
		t.Fatalf("%+v %v, want the refusal taken", st, err)
	}
	paused, ok := hostState(e, "c.test")
	if !ok || paused.PausedUntilMs != e.Now()+5_000 {
		t.Fatalf("after a held 429: %+v %v, want paused 5 s", paused, ok)
	}
	duplicate := refusal
	duplicate.Headers = map[string]string{"retry-after": "600"}
	forged := wire.Result{Key: []byte("desktop|https://d.test/x"), Outcome: "server_error", Status: 429,
		Headers: map[string]string{"retry-after": "600"}, Lease: wire.Lease{Slot: l.Slot, State: l.State, KeyHash: shm.KeyHash([]byte("desktop|https://d.test/x"))}}
	e.Advance(1000)
	if st, err := a.Apply([]wire.Result{duplicate, forged}); err != nil || st.Fenced != 2 {
		t.Fatalf("%+v %v, want both fenced", st, err)
	}
	if hs, _ := hostState(e, "c.test"); hs != paused {
		t.Fatalf("after a fenced duplicate asking 600 s: %+v, want %+v", hs, paused)
	}
	if hs, ok := hostState(e, "d.test"); ok {
		t.Fatalf("a forged lease paused d.test: %+v", hs)
	}
}

// A result key that is not a cache key with an absolute http(s) URL is refused by name before
// anything reads it.
func TestValidateRefusesAKeyThatIsNotAURL(t *testing.T) {
	e := qtest.New(t, politeHosts, start, shm.Options{})
	a := politeApplier(e)
	for _, key := range []string{"h1.flood.example", "desktop|h1.flood.example", "desktop|ftp://h1.flood.example/",
		"desktop|https:///x", "desktop|https://a.test/%zz", "|https://a.test/", "desktop|javascript://h1.flood.example/"} {
		field, err := a.Validate([]wire.Result{{Key: []byte(key), Outcome: "ok", Status: 200, Lease: wire.Lease{Slot: 1, KeyHash: shm.KeyHash([]byte(key))}}})
		if field != "results[0].key" || err == nil {
			t.Errorf("%q: %q %v, want results[0].key refused", key, field, err)
		}
	}
	if field, err := a.Validate([]wire.Result{{Key: []byte("desktop|https://a.test:8443/x?y=1"), Outcome: "ok", Status: 200,
		Lease: wire.Lease{Slot: 1, KeyHash: shm.KeyHash([]byte("desktop|https://a.test:8443/x?y=1"))}}}); err != nil {
		t.Fatalf("a good key: %s %v", field, err)
	}
}

// With NoPoliteness nothing would pause the host, so a refusal is applied as the failure it
// was before politeness: leaving the row due would grant it again at once.
func TestApplyWithoutHostsAppliesARefusal(t *testing.T) {
	e := qtest.New(t, politeHosts, start, shm.Options{})
	d := politeDeps(e)
	d.Hosts = NoPoliteness
	a := newApplier(t, d)
	key := []byte("desktop|https://d.test/x")
	e.Put(string(key), start-hour, false, 0, store.Lanes{})
	st := applyOne(t, e, a, wire.Result{Key: key, Outcome: "server_error", Status: 429, Headers: map[string]string{"retry-after": "2"}})
	if got := readStored(t, e, key); st.Applied != 1 || got.target.Failures.Count != 1 {
		t.Fatalf("%+v, stored %+v", st, got)
	}
	if _, ok := hostState(e, "d.test"); ok {
		t.Fatal("the host table changed without a Tracker")
	}
}

// allowance is hosts.Allow's limit and pause for a state the table holds.
func allowance(st shm.HostState, maxInFlight int, nowMs int64) (limit int, paused bool) {
	a := hosts.Allow(st.Hash, st, true, maxInFlight, hosts.Membership{}, nowMs)
	return a.Limit, a.Paused
}
