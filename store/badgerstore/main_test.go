package badgerstore

import (
	"os"
	"testing"
)

// TestMain runs the crash child when the parent test re-executes this binary (see
// crash_test.go), and removes the benchmark corpus after the run (bench_test.go).
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		os.Exit(0)
	}
	code := m.Run()
	removeBenchCorpus()
	os.Exit(code)
}
