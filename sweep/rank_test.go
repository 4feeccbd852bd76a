package sweep

import (
	"fmt"
	"testing"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/shm"
	"github.com/freshq/freshq/store"
)

// On a route whose interval is a minute (make bench-freshness), queue.policy freshness files
// the rows worth most with rank intervals of seconds (ν ÷ h′ at their crossing) and the rows at
// their ceiling with the route's minute. The sweep ranks the due rows by lateness ÷ rank
// interval below a minute too: a row worth rendering late by 20 s past its crossing, with a
// 2-second rank interval (10 units of ν gained), is published before a ceiling row late by
// 90 s (1.5 intervals), and among the rows ranked by value the one gaining fastest first. A rank
// interval clamped to a minute would rank the value rows by lateness alone, behind every
// ceiling row late by more. The class merge publishes what the full pass does.
func TestSubMinuteRankIntervalsOrderTheDueRows(t *testing.T) {
	e := newEnv(t, `
routes:
  - {name: c, match: prefix, path: /c/, interval: 1m}
queue:
  ready: {capacity: 8}
`, start, shm.Options{})
	var ws []store.Write
	put := func(key string, lateMs, rankMs int64) {
		sch, err := store.NewSchedule([]byte(key), start-lateMs, false, 60_000, store.Lanes{})
		if err == nil {
			sch, err = sch.WithRankInterval(rankMs)
		}
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, store.Write{Schedule: sch})
	}
	// Value rows, late by 20 s, rank intervals 2 s … 9 s: the 2-second one ranks first.
	for i := range 4 {
		put(fmt.Sprintf("desktop|https://a.test/c/v%d", i), 20_000, int64(2_000+i*2_333))
	}
	// Ceiling rows late by 90 s, more of them than the set holds.
	for i := range 12 {
		put(fmt.Sprintf("desktop|https://a.test/c/z%02d", i), 90_000-int64(i)*1000, 60_000)
	}
	if err := e.Store.WriteSchedules(ws); err != nil {
		t.Fatal(err)
	}
	merged, full, _, _ := sweepBothWays(t, e, policy.ModeLanes)
	if len(merged) != len(full) {
		t.Fatalf("class merge published %d, full pass %d", len(merged), len(full))
	}
	for i := range full {
		if string(merged[i].Key) != string(full[i].Key) || merged[i].Score != full[i].Score {
			t.Fatalf("entry %d: class merge %q (%v), full pass %q (%v)", i, merged[i].Key, merged[i].Score, full[i].Key, full[i].Score)
		}
	}
	var got []string
	for _, en := range merged {
		got = append(got, fmt.Sprintf("%s %.2f", en.Key[len("desktop|https://a.test/c/"):], en.Score))
	}
	t.Logf("published: %v", got)
	for i := range 4 {
		if want := fmt.Sprintf("v%d", i); i >= len(merged) || string(merged[i].Key) != "desktop|https://a.test/c/"+want {
			t.Fatalf("entry %d is not %s: the value rows must come first, fastest gaining first: %v", i, want, got)
		}
	}
}
