package policy

import (
	"testing"
	"time"

	"github.com/freshq/freshq/outcome"
)

const minute = int64(60_000)

func TestApplySuccessMovesAlongTheLadder(t *testing.T) {
	p := testPolicy(t) // ladder 6h/12h/24h/48h; catalog route ceiling 24h
	st := State{Key: []byte("desktop|https://a.test/c/shoes"), Submitted: true, NeverRendered: true}
	d := p.Apply(st, outcome.OK, now)
	// New to the ladder: the slowest rung the 24 h ceiling allows.
	if d.Class != ClassSuccess || d.DemandRung != 3 || d.CadenceMs != 24*hour || d.DueAtMs != now+24*hour ||
		!d.StorePage || d.NeverRendered || d.Failing || d.FailCount != 0 {
		t.Fatalf("first success %+v", d)
	}
	st.DemandRung, st.Visited = d.DemandRung, true
	if d = p.Apply(st, outcome.OK, now); d.DemandRung != 2 || d.CadenceMs != 12*hour {
		t.Fatalf("visited: rung %d cadence %v, want rung 2 (12h)", d.DemandRung, d.CadenceMs)
	}
	st.DemandRung = 1
	if d = p.Apply(st, outcome.OK, now); d.DemandRung != 1 || d.CadenceMs != 6*hour {
		t.Fatalf("visited at the fastest rung: %+v", d)
	}
	st.DemandRung, st.Visited = 4, false
	if d = p.Apply(st, outcome.OK, now); d.DemandRung != 4 || d.CadenceMs != 24*hour {
		t.Fatalf("unvisited at the slowest rung: rung %d cadence %v; the route ceiling must clamp it to 24h", d.DemandRung, d.CadenceMs)
	}
	// A route faster than every rung: the homepage stays at its 1 h ceiling.
	home := p.Apply(State{Key: []byte("desktop|https://a.test/")}, outcome.OK, now)
	if home.CadenceMs != hour || home.DemandRung != 1 {
		t.Fatalf("homepage %+v", home)
	}
}

func TestApplySuccessWithExplicitInterval(t *testing.T) {
	p := testPolicy(t)
	st := State{Key: []byte("desktop|https://a.test/c/x"), StoredIntervalMs: 48 * hour, DemandRung: 2}
	d := p.Apply(st, outcome.OK, now)
	if d.CadenceMs != 24*hour || d.DemandRung != 2 {
		t.Fatalf("explicit 48h under a 24h route: %+v; the ladder must not move and the route must clamp", d)
	}
	st.StoredIntervalMs = 3 * hour
	if d = p.Apply(st, outcome.OK, now); d.CadenceMs != 3*hour {
		t.Fatalf("explicit 3h: %+v", d)
	}
}

func TestApplyTransientBacksOff(t *testing.T) {
	p := testPolicy(t) // 2 fast retries at 1m, ×2, max 7d, non-sitemap ×4
	st := State{Key: []byte("desktop|https://a.test/p/1"), Submitted: true, CarriedMs: 48 * hour}
	want := []int64{1, 1, 2, 4, 8, 16}
	for i, w := range want {
		d := p.Apply(st, outcome.ServerError, now)
		if d.DueAtMs != now+w*minute || d.FailCount != uint32(i+1) || d.CadenceMs != 48*hour || !d.Failing || d.Terminal != TerminalNone {
			t.Fatalf("failure %d: due +%v count %d cadence %v; want +%dm", i+1,
				time.Duration(d.DueAtMs-now)*time.Millisecond, d.FailCount, d.CadenceMs, w)
		}
		if i == 0 && d.FailFirstMs != now {
			t.Fatal("first failure time not recorded")
		}
		st.FailCount, st.FailClass, st.FailFirstMs = d.FailCount, d.FailClass, d.FailFirstMs
	}
	if got := p.Backoff(40, true); got != 7*24*hour {
		t.Fatalf("backoff after 40 failures %v, want the 7d cap", got)
	}
	if got := p.Backoff(1, false); got != 4*minute {
		t.Fatalf("non-sitemap first retry %v, want 4m", got)
	}
	if got := p.Backoff(30, false); got != 7*24*hour {
		t.Fatalf("non-sitemap penalty exceeded the cap: %v", got)
	}
}

func TestApplySealsGoneOnEvidence(t *testing.T) {
	p := testPolicy(t) // gone: 2 strikes, 14d recheck
	st := State{Key: []byte("desktop|https://a.test/p/1"), Submitted: true, CarriedMs: 48 * hour}
	d := p.Apply(st, outcome.NotFound, now)
	if d.Terminal != TerminalNone || d.DueAtMs != now+minute || d.FailClass != "gone" {
		t.Fatalf("one 404 sealed or did not retry: %+v", d)
	}
	st.FailCount, st.FailClass, st.FailFirstMs = d.FailCount, d.FailClass, d.FailFirstMs
	d = p.Apply(st, outcome.Gone, now+minute) // a 410 is the same evidence as a 404
	if d.Terminal != TerminalGone || d.RecheckAtMs != now+minute+14*24*hour || d.DueAtMs != d.RecheckAtMs || d.CadenceMs != 48*hour {
		t.Fatalf("second strike: %+v", d)
	}
	// A different failure in between resets the streak: evidence must be consecutive.
	st = State{Key: []byte("desktop|https://a.test/p/2"), FailCount: 1, FailClass: "gone"}
	d = p.Apply(st, outcome.Timeout, now)
	st.FailCount, st.FailClass = d.FailCount, d.FailClass
	if d = p.Apply(st, outcome.NotFound, now); d.Terminal != TerminalNone || d.FailCount != 1 {
		t.Fatalf("streak not reset by a different class: %+v", d)
	}
}

func TestApplySuppressesNoindexAfterStrikes(t *testing.T) {
	p := testPolicy(t) // noindex: 4 strikes, 7d recheck
	st := State{Key: []byte("desktop|https://a.test/p/1"), Submitted: true}
	for i := 1; i <= 4; i++ {
		d := p.Apply(st, outcome.Noindex, now)
		if sealed := d.Terminal == TerminalSuppressed; sealed != (i == 4) {
			t.Fatalf("strike %d: terminal %q", i, d.Terminal)
		}
		if d.StorePage {
			t.Fatalf("strike %d: a noindex page is stored", i)
		}
		if i == 4 && d.DueAtMs != now+7*24*hour {
			t.Fatalf("suppressed recheck at %d", d.DueAtMs)
		}
		st.FailCount, st.FailClass, st.FailFirstMs = d.FailCount, d.FailClass, d.FailFirstMs
	}
}

func TestApplyBlockedAndUnknown(t *testing.T) {
	p := testPolicy(t)
	st := State{Key: []byte("desktop|https://a.test/p/1")}
	if d := p.Apply(st, outcome.Blocked, now); d.DueAtMs != now+7*24*hour || d.Terminal != TerminalNone {
		t.Fatalf("blocked: %+v", d)
	}
	if c := Classify(outcome.Outcome(200)); c != ClassTransient {
		t.Fatalf("an unknown outcome classified %v; it must never seal", c)
	}
}
