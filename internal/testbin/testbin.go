// Package testbin builds freshq's binaries for the tests that run them as real processes (the
// supervisor's and freshqctl's end-to-end tests), so both build them the same way.
package testbin

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles each package (a path relative to the calling test's directory) into a fresh
// temporary directory, under the binary name it maps to, and returns that directory. The caller
// removes it.
func Build(prefix string, bins map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	for name, pkg := range bins {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("building %s from %s: %w", name, pkg, err)
		}
	}
	return dir, nil
}

// Main is a TestMain for tests that run the binaries: it builds bins (as Build) into *dir,
// runs the tests, and removes the directory. With -short nothing is built and *dir stays
// empty: the tests that need the binaries skip. It returns the exit code for os.Exit.
func Main(m *testing.M, dir *string, prefix string, bins map[string]string) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	d, err := Build(prefix, bins)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(d)
	*dir = d
	return m.Run()
}
