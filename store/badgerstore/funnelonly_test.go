package badgerstore

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The funnel is the only writer of s/ and d/ (the package doc, Promises). TestFunnelIsTheOnlyWriter proves it
// from the engine's own source (this package and every package under it), so a later edit
// cannot quietly add a second writer:
//
//  1. every call of a Badger write method (Set, SetEntry, Delete, Update, NewWriteBatch,
//     NewStreamWriter, DropPrefix, DropAll, DB.Load, NewTransaction with anything but false,
//     …) is in package funnel (internal/funnel): no other file writes anything at all;
//  2. the prefix literals "s/" and "d/" appear only in package keyspace's keys.go, which
//     builds keys and writes nothing.
//
// Test files are exempt: they plant corruption and loss on purpose.

var badgerWrites = map[string]bool{
	"Set": true, "SetEntry": true, "SetEntryAt": true, "Delete": true, "DeleteAt": true,
	"Update": true, "NewWriteBatch": true, "NewWriteBatchAt": true, "NewManagedWriteBatch": true,
	"NewStreamWriter": true, "NewStreamAt": true, "DropPrefix": true, "DropAll": true,
	"NewTransactionAt": true, "SetDiscardTs": true,
}

// The files allowed to write, and to spell the prefixes, by their path below this package.
const (
	writerDir = "internal/funnel"
	keysFile  = "internal/keyspace/keys.go"
)

// funnelViolations lists the writes and prefix literals of file name (its path below this
// package, slash-separated) that break the rules.
func funnelViolations(fset *token.FileSet, name string, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING || name == keysFile {
				return true
			}
			if v, err := strconv.Unquote(n.Value); err == nil && (strings.HasPrefix(v, "s/") || strings.HasPrefix(v, "d/")) {
				out = append(out, fmt.Sprintf("%s: literal %s outside %s", fset.Position(n.Pos()), n.Value, keysFile))
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || path.Dir(name) == writerDir {
				return true
			}
			m := sel.Sel.Name
			write := badgerWrites[m]
			switch m {
			case "Load": // DB.Load restores a backup; atomics and floor cells also have Load
				write = receiverName(sel.X) == "db"
			case "NewTransaction":
				write = true
				if len(n.Args) == 1 {
					if id, ok := n.Args[0].(*ast.Ident); ok && id.Name == "false" {
						write = false
					}
				}
			}
			if write {
				out = append(out, fmt.Sprintf("%s: %s call outside package funnel", fset.Position(n.Pos()), m))
			}
		}
		return true
	})
	return out
}

// receiverName is the last name of a receiver expression: db for s.db, txn for txn.
func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

func TestFunnelIsTheOnlyWriter(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, filepath.ToSlash(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked, writers, keys := 0, 0, 0
	for _, name := range files {
		src, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if path.Dir(name) == writerDir {
			writers++
		}
		if name == keysFile {
			keys++
		}
		for _, v := range funnelViolations(fset, name, f) {
			t.Error(v)
		}
	}
	if checked < 10 || writers == 0 || keys == 0 {
		t.Fatalf("%d source files checked, %d of package funnel, %d keys.go: is the test running in the package directory?", checked, writers, keys)
	}
}

// The checker must bite: every kind of write outside the funnel is caught.
func TestFunnelCheckerBites(t *testing.T) {
	src := `package store
func bad(s *Store, txn *badger.Txn) {
	_ = txn.Set(k, v)
	_ = txn.Delete(k)
	_ = s.db.Update(nil)
	_ = s.db.NewTransaction(true)
	_ = s.db.Load(nil, 1)
	_ = "d/x"
	_ = s.floor.Load()             // a read: allowed
	_ = s.db.NewTransaction(false) // a read: allowed
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := funnelViolations(fset, "bad.go", f)
	if len(got) != 6 {
		t.Fatalf("checker found %d violations, want 6:\n%s", len(got), strings.Join(got, "\n"))
	}
	if v := funnelViolations(fset, writerDir+"/funnel.go", f); len(v) != 1 { // only the literal
		t.Fatalf("in package funnel the checker found %v, want only the literal", v)
	}
}
