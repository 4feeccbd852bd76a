package sweep

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/freshq/freshq/cachekey"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/testkit/qtest"
)

// newEnv is the sweep tests' node: its store keeps the class index, as worker 0's does, so
// every sweep test runs the class merge (classes.go). TestClassMergePublishesTheFullSet holds
// it to the full pass.
func newEnv(t testing.TB, yaml string, startMs int64, segOpts shm.Options) *qtest.Env {
	t.Helper()
	return qtest.NewClassified(t, yaml, startMs, segOpts, func(p *policy.Policy) store.Classifier { return NewClassifier(p) })
}

// sweepBothWays sweeps e's store twice at the same instant, by the class merge and by the full
// pass, and returns each published set in publishing order.
func sweepBothWays(t *testing.T, e *qtest.Env, mode policy.Mode) (merged, full []shm.Entry, mres, fres Result) {
	t.Helper()
	s := qtest.Must(New(Options{Store: FromStore(e.Store, nil), Changes: NewChanges(), Segment: e.Seg, Worker: e.Worker0, Policy: e.Policy, Settings: qtest.Settings(e, SweepSettingsOf), Now: e.Now, Log: qtest.Log(nil), Mode: mode}))(t)
	var err error
	if mres, err = s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	merged = takeAll(t, e.Seg)
	s.fullPass = true
	if fres, err = s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	full = takeAll(t, e.Seg)
	if !mres.Classes || fres.Classes {
		t.Fatalf("class merge %v, full pass %v: the sweeps did not read as asked", mres.Classes, fres.Classes)
	}
	return merged, full, mres, fres
}

// The class merge publishes exactly the set the full pass publishes, in the same order, over
// random corpora: lanes, boosts, carried and resolved cadences under route ceilings (a cadence
// carried above its route's ceiling included), rank intervals of the rows' own, host caps and
// pauses, in every mode the merge serves. It reads far fewer rows to do it.
func TestClassMergePublishesTheFullSet(t *testing.T) {
	classMergeAgainstFullPass(t, routes+"workers: 5\nqueue:\n  ready: {capacity: 100}\nrender:\n  default_interval: 6h\n", true)
}

// Under host caps the two differ by design: the full pass reads in due order, so a capped
// host's places go to its oldest rows and promote swaps in the best it refused, one for one,
// while the merge offers rows best first, so which rows hold a host's places depends on the
// order of offers. Both publish as many entries, and the merge keeps every host to its cap.
func TestClassMergeUnderHostCapsKeepsEachHostsBest(t *testing.T) {
	classMergeAgainstFullPass(t, politeness+"  default_interval: 6h\n", false)
}

func classMergeAgainstFullPass(t *testing.T, cfg string, exact bool) {
	cadences := []int64{0, 0, hour / 2, hour, 3 * hour, 6 * hour, 6*hour + 1000, 24 * hour, 24*hour + 60_000, 72 * hour}
	paths := []string{"/", "/c/", "/p/", "/x/", "/blog/"}
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			e := newEnv(t, cfg, start, shm.Options{})
			rng := rand.New(rand.NewPCG(seed, 11))
			const n = 3000
			ws := make([]store.Write, 0, n)
			for i := range n {
				host := fmt.Sprintf("h%d.test", rng.IntN(12))
				if rng.IntN(3) == 0 {
					host = "big.test"
				}
				key := fmt.Sprintf("desktop|https://%s%s%d", host, paths[rng.IntN(len(paths))], i)
				lanes := store.Lanes{Urgent: rng.IntN(40) == 0, NeverRendered: rng.IntN(6) == 0, Failing: rng.IntN(10) == 0}
				// Distinct due times: equal (score, due) pairs are the one place the two may
				// differ (the selector breaks them by offer order).
				due := start - 200*hour + int64(i)*137*1000 + rng.Int64N(137*1000)
				sch, err := store.NewSchedule([]byte(key), due, rng.IntN(2) == 0, cadences[rng.IntN(len(cadences))], lanes)
				if err == nil && rng.IntN(3) == 0 {
					// A rank interval of its own (queue.policy freshness), from a continuum:
					// each such row is nearly a class of its own. Some below a minute, the
					// shortest cadence: the rows worth most on a route of minutes.
					rank := 60_000 + rng.Int64N(500*hour)
					if rng.IntN(4) == 0 {
						rank = 1 + rng.Int64N(60_000)
					}
					sch, err = sch.WithRankInterval(rank)
				}
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, store.Write{Schedule: sch})
			}
			if err := e.Store.WriteSchedules(ws); err != nil {
				t.Fatal(err)
			}
			if seed%2 == 1 { // a paused host
				e.Seg.Hosts().Store(shm.HostState{Host: "h3.test", PausedUntilMs: start + hour, SinceMs: start, Cause: shm.HostCauseRetryAfter, Status: 429})
			}
			for _, mode := range []policy.Mode{policy.ModeLanes, policy.ModeScore, policy.ModeStrict} {
				merged, full, mres, fres := sweepBothWays(t, e, mode)
				if len(full) == 0 {
					t.Fatal("the full pass published nothing: the test compares nothing")
				}
				if len(merged) != len(full) {
					t.Fatalf("class merge published %d, full pass %d", len(merged), len(full))
				}
				if !exact {
					m, f := perHostScores(merged), perHostScores(full)
					for host, n := range m.count {
						if n > 10 { // limit 2 of 40 slots, twice its share of 100
							t.Fatalf("class merge published %d of %s, over its cap of 10: %v", n, host, m.count)
						}
					}
					t.Logf("per host: class merge %v (score %.1f), full pass %v (score %.1f)", m.count, m.sum, f.count, f.sum)
					if fres.ExcludedHostCapped == 0 {
						t.Fatal("no row was capped: the test compares nothing")
					}
					continue
				}
				for i := range full {
					m, f := merged[i], full[i]
					if string(m.Key) != string(f.Key) || m.Score != f.Score || m.Lane != f.Lane || m.DueAtMs != f.DueAtMs || m.CadenceMs != f.CadenceMs {
						t.Fatalf("%s entry %d: class merge %q score %v lane %d, full pass %q score %v lane %d", mode, i, m.Key, m.Score, m.Lane, f.Key, f.Score, f.Lane)
					}
				}
				if mres.ExcludedHostPaused > 0 != (fres.ExcludedHostPaused > 0) || mres.FloorMs != fres.FloorMs || mres.NextDueMs != fres.NextDueMs {
					t.Fatalf("class merge %+v\nfull pass %+v", mres, fres)
				}
				t.Logf("%s: published %d; the class merge read %d rows, the full pass %d", mode, len(full), mres.Rows, fres.Rows)
				// The selector's lane bars stop each lane where the set ends: about K rows
				// in all, where keeping K a lane read close to 4K here.
				if mode == policy.ModeLanes && mres.Rows > 2*len(full) {
					t.Fatalf("%s: the class merge read %d rows to publish %d", mode, mres.Rows, len(full))
				}
			}
		})
	}
}

type hostScores struct {
	count map[string]int
	sum   float64
}

func perHostScores(es []shm.Entry) hostScores {
	h := hostScores{count: map[string]int{}}
	for _, e := range es {
		h.count[string(cachekey.Host(e.Key))]++
		h.sum += e.Score
	}
	return h
}
