package testbin

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// offsetSymbol is the function of internal/clock that maps the offset file; it is linked into a
// binary exactly when the binary can read the file.
const offsetSymbol = "github.com/freshq/freshq/internal/clock.mapOffsetFile"

func symbols(t *testing.T, bin string) []string {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Skipf("not an ELF binary, cannot list its symbols: %v", err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(syms))
	for i, s := range syms {
		names[i] = s.Name
	}
	return names
}

// The worker is built twice: as make build builds it (plain go build), it must not contain the
// code that maps the clock offset file; as Build builds it for the end-to-end tests, it must,
// and its build info must carry the tag.
func TestOnlyTestBinariesMapTheClockFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	dir := t.TempDir()
	prod := filepath.Join(dir, "freshq-worker")
	cmd := exec.Command("go", "build", "-o", prod, "../../cmd/worker")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(symbols(t, prod), offsetSymbol) {
		t.Errorf("the production worker links %s: it would honour the clock offset file", offsetSymbol)
	}
	if err := checkTagged(prod); err == nil {
		t.Errorf("checkTagged accepts the production worker")
	}

	testDir, err := Build("testbin-test-", map[string]string{"freshq-worker": "../../cmd/worker"})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(testDir)
	if !slices.Contains(symbols(t, filepath.Join(testDir, "freshq-worker")), offsetSymbol) {
		t.Errorf("the worker built for tests lacks %s: the end-to-end tests could not move its clock", offsetSymbol)
	}
}
