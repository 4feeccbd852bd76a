package lint

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGoModIsTidy fails when go.mod or go.sum differs from what `go mod tidy` would write: a
// dependency imported directly but marked indirect, one required that nothing imports, or a
// missing checksum. It needs the module cache (or the module proxy) to hold every module the
// build graph names, as any build does.
func TestGoModIsTidy(t *testing.T) {
	if testing.Short() {
		t.Skip("short: go mod tidy reads the whole module graph")
	}
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		var diff []string
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "go: downloading") {
				diff = append(diff, line)
			}
		}
		t.Fatalf("go mod tidy would change go.mod or go.sum (run go mod tidy): %v\n%s", err, strings.Join(diff, "\n"))
	}
}
