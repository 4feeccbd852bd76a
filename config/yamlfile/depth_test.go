package yamlfile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The depth bound refuses a file nested past MaxNestingDepth, by block indentation, compact
// sequences or flow collections, with the line; what nests within the bound, and brackets in
// quotes, comments and block scalars, pass.
func TestBoundDepth(t *testing.T) {
	flow := func(d int) string { return strings.Repeat("[", d) + strings.Repeat("]", d) }
	block := func(d int) string {
		var b strings.Builder
		for i := range d {
			b.WriteString(strings.Repeat("  ", i) + "k:\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, yaml string
		line       int // 0: passes
	}{
		{"flow within", "a: " + flow(MaxNestingDepth-1) + "\n", 0},
		{"flow past", "a: 1\nb: " + flow(MaxNestingDepth) + "\n", 2},
		{"compact sequence past", "x: 1\n" + strings.Repeat("- ", MaxNestingDepth+1) + "a\n", 2},
		{"sequence of flow past", "- " + flow(2000) + "\n", 1},
		{"flow over lines past", "a: [\n" + strings.Repeat("[\n", MaxNestingDepth) + "]\n", MaxNestingDepth},
		{"block within", block(MaxNestingDepth), 0},
		{"block past", block(MaxNestingDepth + 1), MaxNestingDepth + 1},
		{"quoted", "a: \"" + strings.Repeat("[", 500) + "\"\nb: '" + strings.Repeat("{", 500) + "'\n", 0},
		{"comment", "a: 1 # " + strings.Repeat("[", 500) + "\n", 0},
		{"block scalar", "a: |\n  " + strings.Repeat("[", 500) + "\nb: 1\n", 0},
	} {
		err := BoundDepth([]byte(tc.yaml))
		switch {
		case tc.line == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.line != 0 && (err == nil || !strings.Contains(err.Error(), "line "+strconv.Itoa(tc.line)+":")):
			t.Errorf("%s: %v, want a refusal at line %d", tc.name, err, tc.line)
		}
	}
	// Every configuration the repository ships is within the bound.
	files, _ := filepath.Glob("../../examples/*.yaml")
	more, _ := filepath.Glob("../testdata/*.yaml")
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := BoundDepth(data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// The scan never panics, whatever the bytes.
func FuzzBoundDepth(f *testing.F) {
	for _, s := range []string{"a: [\n", "- - - x", "a: |\n  [[[\n", "'\n[[[", "\"\\", "a: >-2 # c\n b", "[{[{", "# [[[[\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		BoundDepth(b)
	})
}
