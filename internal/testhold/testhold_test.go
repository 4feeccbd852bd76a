package testhold_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/internal/testbin"
	"github.com/freshq/freshq/internal/testhold"
)

// testHookMarks are strings only a binary carrying a test hook contains: the hold's variable and
// announcement, and the test clock's offset file.
var testHookMarks = []string{testhold.EnvHold, testhold.Announce, clock.EnvFile}

// The binaries freshq ships are built without tags (make build, go install): none of them may
// carry a test hook, since a hook in a shipped binary could be switched on by its environment.
// The same binaries built as the end-to-end tests build them must carry every hook, which shows
// the check reads what it claims to.
func TestProductionBinariesLinkNoTestHook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries twice")
	}
	dir := t.TempDir()
	for _, pkg := range []string{"supervisor", "worker", "freshqctl"} {
		src := filepath.Join("..", "..", "cmd", pkg)
		prod := build(t, filepath.Join(dir, pkg), src)
		for _, mark := range testHookMarks {
			if bytes.Contains(prod, []byte(mark)) {
				t.Errorf("the production build of cmd/%s contains %q", pkg, mark)
			}
		}
		if pkg == "freshqctl" {
			continue // it has no hold and reads no clock file: nothing to compare with
		}
		tagged := build(t, filepath.Join(dir, pkg+"-test"), src, "-tags", testbin.Tag)
		for _, mark := range testHookMarks {
			if !bytes.Contains(tagged, []byte(mark)) {
				t.Errorf("the test build of cmd/%s lacks %q: the check cannot see the hook", pkg, mark)
			}
		}
	}
}

func build(t *testing.T, out, pkg string, flags ...string) []byte {
	t.Helper()
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
