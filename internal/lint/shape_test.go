package lint

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The shape of the code a reader takes over: short functions, packages that fit in a head, thin
// commands, and engines reached through contracts. Each limit is a number here so that raising
// one is a visible decision in a diff, not a drift.
const (
	maxFunctionLines = 120  // a function's lines, signature to closing brace
	maxPackageLines  = 2500 // a package's lines outside tests
	maxCommandLines  = 1500 // cmd/supervisor and cmd/worker together, outside tests
)

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../.."

// exemptFromShape are the trees the shape limits do not bind: the simulator (a model kept whole
// on purpose, see sim/doc.go), the dependency-free fuzz harness's inputs, and what is not Go
// source of the product.
func exemptFromShape(rel string) bool {
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "sim", ".git", "node_modules":
		return true
	}
	return strings.Contains(rel, "/testdata/") || strings.HasPrefix(rel, "testdata/") || strings.Contains(rel, "/node_modules/")
}

// sourceFile is one non-test Go file of the product.
type sourceFile struct {
	rel   string // path from the module root
	pkg   string // its directory, from the module root
	lines int
	ast   *ast.File
	fset  *token.FileSet
}

// productSources parses every non-test, non-generated Go file outside the exempt trees.
func productSources(t *testing.T) []sourceFile {
	t.Helper()
	var files []sourceFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || exemptFromShape(rel+"/")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || exemptFromShape(rel) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated(src) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		files = append(files, sourceFile{rel: rel, pkg: filepath.ToSlash(filepath.Dir(rel)),
			lines: bytes.Count(src, []byte("\n")), ast: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatalf("reading the tree: %v", err)
	}
	if len(files) < 100 {
		t.Fatalf("read %d source files from %s: not the module's tree", len(files), repoRoot)
	}
	return files
}

// generated reports whether src carries Go's generated-code marker.
func generated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
		if strings.HasPrefix(line, "package ") {
			return false
		}
	}
	return false
}

// TestFunctionsAreShort fails on a function or method longer than maxFunctionLines.
func TestFunctionsAreShort(t *testing.T) {
	for _, f := range productSources(t) {
		for _, d := range f.ast.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := f.fset.Position(fd.Pos()).Line, f.fset.Position(fd.End()).Line
			if n := end - start + 1; n > maxFunctionLines {
				t.Errorf("%s:%d: %s is %d lines (at most %d): split it into named steps", f.rel, start, fd.Name.Name, n, maxFunctionLines)
			}
		}
	}
}

// TestPackagesAreSmall fails on a package whose non-test files hold more than maxPackageLines
// lines, and on cmd/supervisor and cmd/worker holding more than maxCommandLines together: a
// command parses flags, loads configuration, assembles and runs; the work is in packages.
func TestPackagesAreSmall(t *testing.T) {
	lines := map[string]int{}
	for _, f := range productSources(t) {
		lines[f.pkg] += f.lines
	}
	pkgs := make([]string, 0, len(lines))
	for p := range lines {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if lines[p] > maxPackageLines {
			t.Errorf("package %s is %d lines outside tests (at most %d): split it along a seam with one job", p, lines[p], maxPackageLines)
		}
	}
	if n := lines["cmd/supervisor"] + lines["cmd/worker"]; n > maxCommandLines {
		t.Errorf("cmd/supervisor and cmd/worker are %d lines outside tests (%d + %d; at most %d together)",
			n, lines["cmd/supervisor"], lines["cmd/worker"], maxCommandLines)
	}
}

// engineStores are the engines' concrete store types, and the trees allowed to name them in a
// type assertion: the engines themselves and the assembly that chooses one. Anywhere else, an
// assertion to an engine is a second store contract hiding from the first.
var engineStores = map[string]string{"pgstore": "store/pgstore", "badgerstore": "store/badgerstore"}

func mayAssertEngine(pkg string) bool {
	for _, dir := range []string{"store/pgstore", "store/badgerstore", "assemble"} {
		if pkg == dir || strings.HasPrefix(pkg, dir+"/") {
			return true
		}
	}
	return false
}

// TestNoEngineTypeAssertions fails on a type assertion or type switch case naming
// *pgstore.Store or *badgerstore.Store outside the engines and assemble/.
func TestNoEngineTypeAssertions(t *testing.T) {
	for _, f := range productSources(t) {
		if mayAssertEngine(f.pkg) {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			var types []ast.Expr
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				types = append(types, n.Type)
			case *ast.TypeSwitchStmt:
				for _, c := range n.Body.List {
					types = append(types, c.(*ast.CaseClause).List...)
				}
			}
			for _, typ := range types {
				if name, ok := engineStoreType(typ); ok {
					t.Errorf("%s:%d: type assertion to *%s.Store: reach the engine through a contract (store.Store, or the capability it offers), chosen in assemble/",
						f.rel, f.fset.Position(typ.Pos()).Line, name)
				}
			}
			return true
		})
	}
}

// engineStoreType reports whether typ is *pgstore.Store or *badgerstore.Store.
func engineStoreType(typ ast.Expr) (string, bool) {
	star, ok := typ.(*ast.StarExpr)
	if !ok {
		return "", false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Store" {
		return "", false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", false
	}
	_, engine := engineStores[pkg.Name]
	return pkg.Name, engine
}

// TestPostgresEngineImportsNoDomain fails when store/pgstore (or a package below it) imports a
// freshq package other than the store contract and its own subpackages: the engine implements
// contracts; the domain (cluster, hosts, policy…) implements nothing for it.
func TestPostgresEngineImportsNoDomain(t *testing.T) {
	for pkg, imports := range listPackages(t) {
		if pkg != "store/pgstore" && !strings.HasPrefix(pkg, "store/pgstore/") {
			continue
		}
		for _, imp := range imports {
			if imp == "store" || imp == "store/pgstore" || strings.HasPrefix(imp, "store/pgstore/") || strings.HasPrefix(imp, "internal/") && isLeaf(imp) {
				continue
			}
			t.Errorf("%s imports %s: the PostgreSQL engine imports only the store contract, its own packages and leaf utilities", pkg, imp)
		}
	}
}

// leaves are the utilities under internal/ that the domain may import: each imports no freshq
// package but other leaves. Test harnesses, which import the whole house, live in testkit/.
var leaves = []string{"internal/clock", "internal/connguard", "internal/grantlog", "internal/invariants",
	"internal/logging", "internal/startstop", "internal/testhold"}

func isLeaf(pkg string) bool {
	for _, l := range leaves {
		if pkg == l {
			return true
		}
	}
	return false
}

// TestInternalHoldsOnlyLeaves fails when a package under internal/ (other than this lint
// package, which reads the tree and imports nothing of it) is not a listed leaf, or a leaf
// imports something other than another leaf: leaves sit below the domain, harnesses above it.
func TestInternalHoldsOnlyLeaves(t *testing.T) {
	for pkg, imports := range listPackages(t) {
		if !strings.HasPrefix(pkg, "internal/") || pkg == "internal/lint" {
			continue
		}
		if !isLeaf(pkg) {
			t.Errorf("%s is under internal/ but is not a leaf utility: a test harness belongs in testkit/, a leaf in the leaves list", pkg)
			continue
		}
		for _, imp := range imports {
			if !isLeaf(imp) {
				t.Errorf("leaf %s imports %s: a leaf imports only other leaves", pkg, imp)
			}
		}
	}
}
