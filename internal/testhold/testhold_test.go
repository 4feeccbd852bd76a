package testhold_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/freshq/freshq/internal/clock"
	"github.com/freshq/freshq/internal/grantlog"
	"github.com/freshq/freshq/internal/testhold"
	"github.com/freshq/freshq/render/chrome"
	"github.com/freshq/freshq/testkit/testbin"
)

// testSwitchPrefix begins the name of every environment variable that switches on test-only
// behaviour: a production binary that contains it could read one.
const testSwitchPrefix = "FRESHQ_TEST_"

// testSwitch finds a test switch's name in a binary, for the failure message. A binary's
// strings lie one after another with nothing between them, so the name it reads may run on
// into the next string (FRESHQ_TEST_FLOOR_ON_WRITERGET).
var testSwitch = regexp.MustCompile(testSwitchPrefix + `[A-Z0-9_]*`)

// otherMarks are strings only a binary carrying a test hook contains that do not begin with
// testSwitchPrefix: the hold's announcement and the test clock's offset file.
var otherMarks = []string{testhold.Announce, clock.EnvFile}

// taggedMarks are the test switches each binary built as the end-to-end tests build it must
// carry: what the check of the production builds would find, were they there. freshqctl has
// none.
var taggedMarks = map[string][]string{
	"supervisor": {testhold.EnvHold, testhold.Announce, clock.EnvFile},
	"worker": {testhold.EnvHold, testhold.Announce, clock.EnvFile, grantlog.Env, chrome.EnvSurvive,
		"FRESHQ_TEST_FLOOR_ON_WRITER"},
}

// The binaries freshq ships are built without tags (make build, go install): none of them may
// carry a test hook, since a hook in a shipped binary could be switched on by its environment.
// Any string beginning with FRESHQ_TEST_ fails it, not only the switches known today. The same
// binaries built as the end-to-end tests build them must carry every known switch, which shows
// the check reads what it claims to.
func TestProductionBinariesLinkNoTestHook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries twice")
	}
	dir := t.TempDir()
	for _, pkg := range []string{"supervisor", "worker", "freshqctl"} {
		src := filepath.Join("..", "..", "cmd", pkg)
		prod := build(t, filepath.Join(dir, pkg), src)
		for _, name := range testSwitch.FindAll(prod, -1) {
			t.Errorf("the production build of cmd/%s contains a test switch: %q", pkg, name)
		}
		for _, mark := range otherMarks {
			if bytes.Contains(prod, []byte(mark)) {
				t.Errorf("the production build of cmd/%s contains %q", pkg, mark)
			}
		}
		marks := taggedMarks[pkg]
		if len(marks) == 0 {
			continue // nothing to compare with
		}
		tagged := build(t, filepath.Join(dir, pkg+"-test"), src, "-tags", testbin.Tag)
		for _, mark := range marks {
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
