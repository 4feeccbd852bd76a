package hosts

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/freshq/freshq/wire"
)

// TestCompare: the paused hosts first, the longest pause first; then the lowest limit ÷ max
// (1/4 before 2/5 before 1/2); a host at its maximum last; equal
// rows by name — whatever order the table's slots hold them in.
func TestCompare(t *testing.T) {
	want := []wire.QueueHost{
		{Host: "long", Paused: true, PausedUntilMs: 9000, Limit: 4, Max: 4},
		{Host: "a-short", Paused: true, PausedUntilMs: 5000, Limit: 1, Max: 4},
		{Host: "b-short", Paused: true, PausedUntilMs: 5000, Limit: 4, Max: 4},
		{Host: "quarter", Limit: 1, Max: 4},
		{Host: "two-fifths", Limit: 2, Max: 5},
		{Host: "a-half", Limit: 1, Max: 2},
		{Host: "b-half", Limit: 2, Max: 4},
		{Host: "full", Limit: 8, Max: 8, PausedUntilMs: 100},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		got := slices.Clone(want)
		r.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortFunc(got, Compare)
		if names(got) != names(want) {
			t.Fatalf("sorted: %s\nwant:   %s", names(got), names(want))
		}
	}
}

func names(rows []wire.QueueHost) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Host)
	}
	return strings.Join(s, " ")
}
