package lint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchmarksDocEndsWithTheByHandSections: docs/BENCHMARKS.md is written by scripts/bench.sh,
// which copies every file of scripts/bench/by-hand, in name order and each followed by a blank
// line, after the sections it measures. A figure written into the generated file and not into
// its by-hand file would be lost at the next `make bench`; this keeps the two the same.
func TestBenchmarksDocEndsWithTheByHandSections(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "scripts", "bench", "by-hand", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no by-hand sections: %v", err)
	}
	var want strings.Builder
	for _, f := range files { // Glob sorts, as the shell's glob does
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(b)
		want.WriteString("\n")
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(doc), want.String()) {
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if !strings.Contains(string(doc), string(b)) {
				t.Errorf("docs/BENCHMARKS.md does not hold %s as it is: edit the by-hand file and copy it (scripts/bench.sh)", filepath.Base(f))
			}
		}
		t.Errorf("docs/BENCHMARKS.md does not end with the by-hand sections in name order")
	}
}
