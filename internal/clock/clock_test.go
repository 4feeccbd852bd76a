package clock

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv marks the re-executed test binary that prints its clock and exits.
const helperEnv = "FRESHQ_CLOCK_TEST_HELPER"

// The offset file is mapped at init, so the test runs a fresh copy of its own binary with
// EnvFile set and compares the clock it reports with the wall clock. A build without the
// testclock tag must ignore the file; a build with it must add the offset.
func TestOffsetFileIsReadOnlyByTestBuilds(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		os.Stdout.WriteString(strconv.FormatInt(NowMs(), 10) + "\n")
		return
	}
	const offset = 10 * 24 * time.Hour
	f := filepath.Join(t.TempDir(), "clock")
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(offset.Milliseconds()))
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOffsetFileIsReadOnlyByTestBuilds$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvFile+"="+f)
	before := time.Now().UnixMilli()
	out, err := cmd.Output()
	after := time.Now().UnixMilli()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	got, err := strconv.ParseInt(strings.SplitN(string(out), "\n", 2)[0], 10, 64)
	if err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	var shift int64
	if TestClock {
		shift = offset.Milliseconds()
	}
	if got < before+shift || got > after+shift {
		t.Fatalf("TestClock=%v: helper's clock %d, want within [%d, %d] (wall clock + %d ms)",
			TestClock, got, before+shift, after+shift, shift)
	}
}

// Without a file, every build is the wall clock.
func TestNowIsTheWallClockWithoutAFile(t *testing.T) {
	if os.Getenv(EnvFile) != "" {
		t.Skip(EnvFile + " is set")
	}
	before := time.Now().UnixMilli()
	got := NowMs()
	after := time.Now().UnixMilli()
	if got < before || got > after {
		t.Fatalf("NowMs %d, want within [%d, %d]", got, before, after)
	}
	if now := Now().UnixMilli(); now < got {
		t.Fatalf("Now %d went back from NowMs %d", now, got)
	}
}
