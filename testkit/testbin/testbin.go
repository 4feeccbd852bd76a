// Package testbin builds freshq's binaries for the tests that run them as real processes (the
// supervisor's and freshqctl's end-to-end tests), so both build them the same way.
//
// Those binaries are built with the build tag Tag, which gives them internal/clock's offset-file
// clock: the tests move every process's time by writing one file. Binaries built any other way
// (make build, go install) have the plain wall clock; a binary Build returns always has the tag,
// or Build fails.
package testbin

import (
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Tag is the build tag of binaries built for tests (see internal/clock).
const Tag = "testclock"

// Build compiles each package (a path relative to the calling test's directory) with the build
// tag Tag into a fresh temporary directory, under the binary name it maps to, and returns that
// directory. The caller removes it.
func Build(prefix string, bins map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	for name, pkg := range bins {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-tags", Tag, "-o", out, pkg)
		cmd.Stderr = os.Stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("building %s from %s: %w", name, pkg, err)
		} else {
			err = checkTagged(out)
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// checkTagged reads the build settings the go command recorded in the binary, so that a test
// never runs a binary without the offset clock (whose time it could not move) by mistake.
func checkTagged(bin string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("reading the build info of %s: %w", bin, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), Tag) {
			return nil
		}
	}
	return fmt.Errorf("%s was not built with -tags %s", bin, Tag)
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
