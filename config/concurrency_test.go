package config

import (
	"errors"
	"testing"
)

// When render.concurrency is absent (or 0), the chrome renderer's pages in flight are derived
// from the cores handed in: ChromePagesPerCore a core for the node, shared out between its
// render workers (workers − 1), at least ConcurrencyDerivedMin a worker. The cores are an
// argument, never the test machine's.
func TestRenderConcurrencyDerivedFromCores(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		cores int
		want  int
	}{
		{"render:\n  renderer: chrome\n", 2, 5},                    // 2 render workers × 5 = 10 in flight on 2 cores
		{"render:\n  renderer: chrome\n", 8, 20},                   // 2 × 20 = 40 on 8 cores
		{"render:\n  renderer: chrome\n", 1, 2},                    // 5 ÷ 2 rounds down to the floor: 2 a worker
		{"render:\n  renderer: chrome\n  concurrency: 0\n", 4, 10}, // 0 is the derived value, written out
		{"workers: 2\nrender:\n  renderer: chrome\n", 4, 20},       // one render worker takes all 5 × 4
		{"workers: 4\nrender:\n  renderer: chrome\n", 16, 26},      // 80 shared by 3 workers, rounded down
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.RenderConcurrency(tc.cores); got != tc.want {
			t.Errorf("%q on %d cores: %d pages in flight a render worker, want %d", tc.yaml, tc.cores, got, tc.want)
		}
	}
}

// A number written in the file is what runs, whatever the cores; the renderers bound by their
// origin rather than the CPU (http, exec, sim) keep ConcurrencyDefault when it is absent.
func TestRenderConcurrencyExplicitWinsAndOthersKeepTheirDefault(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{
		{"render:\n  renderer: chrome\n  concurrency: 16\n", 16},
		{"render:\n  renderer: chrome\n  concurrency: 1\n", 1},
		{"render:\n  renderer: http\n", ConcurrencyDefault},
		{"render:\n  renderer: sim\n", ConcurrencyDefault},
		{"render:\n  renderer: http\n  concurrency: 3\n", 3},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		for _, cores := range []int{1, 2, 64} {
			if got := c.RenderConcurrency(cores); got != tc.want {
				t.Errorf("%q on %d cores: %d, want %d", tc.yaml, cores, got, tc.want)
			}
		}
	}
}

// A render.concurrency below 0 or above ConcurrencyMax is refused, naming the key and its line,
// as the only problem of the file. A word ("auto") is not a spelling of the derived value (0 is):
// the decoder refuses it at its line and column.
func TestRenderConcurrencyRefusals(t *testing.T) {
	checkRefusals(t, []refusal{
		{"render:\n  renderer: chrome\n  concurrency: -1\n", "line 3: render.concurrency"},
		{"render:\n  concurrency: 4097\n", "line 2: render.concurrency"},
		{"render:\n  concurrency: auto\n", "[2:16]"},
	})
}

// The render loops are started with the derived figure, so a reload that would derive another
// (render.renderer to or from chrome while render.concurrency is unset) is refused, naming
// render.renderer, as a change of render.concurrency is; with a number set, or between two
// renderers that derive alike, the renderer still changes live.
func TestReloadRefusesARendererThatChangesTheDerivedConcurrency(t *testing.T) {
	for _, tc := range []struct {
		running, next string
		refused       bool
	}{
		{"render:\n  renderer: http\n", "render:\n  renderer: chrome\n", true},
		{"render:\n  renderer: chrome\n", "render:\n  renderer: sim\n", true},
		{"render:\n  renderer: http\n", "render:\n  renderer: sim\n", false},
		{"render:\n  renderer: http\n  concurrency: 4\n", "render:\n  renderer: chrome\n  concurrency: 4\n", false},
	} {
		running, err := Parse([]byte(tc.running))
		if err != nil {
			t.Fatal(err)
		}
		next, err := Parse([]byte(tc.next))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckReload(running, next, []byte(tc.next))
		var fe *FieldError
		switch {
		case tc.refused && (!errors.As(err, &fe) || fe.Path != "render.renderer" || fe.Line != 2):
			t.Errorf("%q after %q: got %v, want a refusal naming render.renderer at line 2", tc.next, tc.running, err)
		case !tc.refused && err != nil:
			t.Errorf("%q after %q: refused: %v", tc.next, tc.running, err)
		}
	}
}
