package wire_test

import (
	"go/build"
	"strings"
	"testing"
)

// wire is a leaf: it imports nothing else of freshq but the leaf outcome (which imports nothing
// of freshq itself), so that a client of the API links no store, no shared memory and no
// renderer.
func TestImportsNothingOfFreshq(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/freshq/freshq/") && imp != "github.com/freshq/freshq/outcome" {
			t.Errorf("wire imports %s", imp)
		}
	}
}
