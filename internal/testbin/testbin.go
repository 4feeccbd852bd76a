// Package testbin builds freshq's binaries for the tests that run them as real processes (the
// supervisor's and freshqctl's end-to-end tests), so both build them the same way.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
