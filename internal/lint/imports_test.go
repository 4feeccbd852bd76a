package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/freshq/freshq"

var rewrite = flag.Bool("rewrite", false, "rewrite the import list in docs/ARCHITECTURE.md from the code")

// allowed is, for every package of freshq (its path below the module), the packages of freshq its
// non-test files may import. It is exact: an import not listed fails, and so does a listed one
// the package no longer makes, so the table (and the list generated from it) never flatters
// the code.
var allowed = map[string][]string{
	"api":                 {"apply", "claim", "crawlers", "hosts", "intake", "leases", "misses", "policy", "renderlog", "shm", "sitemapruns", "wire"},
	"apply":               {"cachekey", "claim", "freshness", "hosts", "intake", "leases", "outcome", "pagedigest", "policy", "render", "shm", "store", "verdict", "wire"},
	"assemble":            {"cachekey", "config", "hosts", "policy", "render", "render/chrome"},
	"assemble/node":       {"api", "assemble", "capacity", "claim", "config", "crawlers", "intake", "misses", "policy", "serve", "sitemap", "sitemapruns", "sweep", "wire"},
	"cachekey":            {},
	"capacity":            {"freshness", "internal/startstop", "policy", "store", "wire"},
	"claim":               {"hosts", "policy", "shm", "store"},
	"cluster":             {"shm"},
	"cluster/clustertest": {"cluster"},
	"cmd/freshqctl":       {"wire"},
	"cmd/supervisor":      {"assemble", "config", "console", "hosts", "internal/clock", "internal/connguard", "internal/logging", "internal/testhold", "outcome", "shm", "wire"},
	"cmd/worker": {"api", "apply", "assemble", "assemble/node", "cachekey", "capacity", "claim", "cluster", "config", "crawlers", "freshness", "hosts", "intake",
		"internal/clock", "internal/connguard", "internal/grantlog", "internal/logging", "internal/startstop", "internal/testhold",
		"misses", "outcome", "policy", "render", "render/chrome", "renderlog", "serve", "shm", "sitemapruns", "store", "store/badgerstore", "store/pgstore", "sweep", "verdict", "wire"},
	"config":              {"cachekey", "crawlers", "verdict", "wire"},
	"console":             {"wire"},
	"crawlers":            {},
	"freshness":           {},
	"pagedigest":          {},
	"verdict":             {},
	"fuzz":                {},
	"hosts":               {"cachekey", "internal/startstop", "outcome", "shm", "wire"},
	"intake":              {"cachekey", "freshness", "hosts", "policy", "render", "shm", "store", "verdict", "wire"},
	"internal/clock":      {},
	"internal/connguard":  {},
	"internal/grantlog":   {},
	"internal/intaketest": {"apply", "intake"},
	"internal/invariants": {},
	"internal/lint":       {},
	"internal/logging":    {},
	"internal/pgtest":     {},
	"internal/qtest":      {"assemble", "config", "policy", "shm", "store", "store/badgerstore"},
	"internal/startstop":  {},
	"internal/testbin":    {},
	"internal/testdns":    {},
	"internal/testhold":   {},
	"leases":              {"cachekey", "claim", "hosts", "intake", "policy", "shm", "store", "wire"},
	"misses":              {"cachekey", "intake", "render"},
	"outcome":             {},
	"policy":              {"cachekey", "outcome", "store"},
	"renderlog":           {"cachekey", "wire"},
	"render":              {"outcome"},
	"render/chrome":       {"outcome", "render"},
	"serve":               {"cachekey", "crawlers", "intake", "internal/connguard", "misses", "render", "wire"},
	"shm":                 {},
	"sim":                 {"assemble", "assemble/node", "cachekey", "capacity", "claim", "config", "freshness", "outcome", "policy", "shm", "store", "sweep"},
	"sim/freshreport":     {"config", "sim"},
	"sim/simreport":       {"config", "sim"},
	"sitemap":             {"cachekey", "policy", "render"},
	"sitemapruns":         {"cachekey", "intake", "internal/startstop", "render", "sitemap", "wire"},
	"store":               {},
	"store/badgerstore":   {"cachekey", "internal/invariants", "store"},
	"store/pgstore":       {"cluster", "store"},
	"store/storetest":     {"internal/invariants", "store"},
	"sweep":               {"hosts", "policy", "shm", "store"},
	"wire":                {"outcome"},
}

// testHelpers may be imported by tests only.
var testHelpers = []string{"internal/qtest", "internal/pgtest", "internal/testdns", "internal/testbin",
	"store/storetest", "cluster/clustertest"}

type pkg struct {
	ImportPath string
	Imports    []string
}

// listPackages runs go list over the module and returns each package's freshq imports, relative
// to the module.
func listPackages(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		var ours []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				ours = append(ours, rel)
			}
		}
		sort.Strings(ours)
		got[name] = ours
	}
	return got
}

func TestImportsFollowTheTable(t *testing.T) {
	got := listPackages(t)
	for name, imports := range got {
		want, ok := allowed[name]
		if !ok {
			t.Errorf("package %s is not in the table of allowed imports (internal/lint): add it with the imports it may make", name)
			continue
		}
		for _, imp := range imports {
			if !slices.Contains(want, imp) {
				t.Errorf("%s imports %s, which the table of allowed imports does not allow", name, imp)
			}
		}
		for _, imp := range want {
			if !slices.Contains(imports, imp) {
				t.Errorf("%s no longer imports %s: take it out of the table of allowed imports", name, imp)
			}
		}
	}
	for name := range allowed {
		if _, ok := got[name]; !ok {
			t.Errorf("the table of allowed imports names %s, which no longer exists", name)
		}
	}
}

func TestNoProductionPackageImportsATestHelper(t *testing.T) {
	for name, imports := range allowed {
		for _, imp := range imports {
			if slices.Contains(testHelpers, imp) && !slices.Contains(testHelpers, name) {
				t.Errorf("%s may import %s, a test helper", name, imp)
			}
		}
	}
}

const (
	archDoc    = "../../docs/ARCHITECTURE.md"
	beginMark  = "<!-- imports: generated by go test ./internal/lint/ -rewrite; do not edit -->"
	endMark    = "<!-- imports: end -->"
	listIntro  = "| package | imports of freshq |\n|---|---|\n"
	noneImport = "—"
)

// importList is the table of allowed imports as docs/ARCHITECTURE.md shows it.
func importList() string {
	names := make([]string, 0, len(allowed))
	for name := range allowed {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(listIntro)
	for _, name := range names {
		imps := slices.Clone(allowed[name])
		sort.Strings(imps)
		cell := noneImport
		if len(imps) > 0 {
			cell = "`" + strings.Join(imps, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, cell)
	}
	return b.String()
}

// The list of imports in docs/ARCHITECTURE.md is generated from the table, so the document
// says what the code does.
func TestArchitectureDocListsTheImports(t *testing.T) {
	doc, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated import list between %q and %q", archDoc, beginMark, endMark)
	}
	want := beginMark + "\n" + importList() + endMark
	have := s[i : j+len(endMark)]
	if have == want {
		return
	}
	if *rewrite {
		if err := os.WriteFile(archDoc, []byte(s[:i]+want+s[j+len(endMark):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's import list differs from the table of allowed imports; run go test ./internal/lint/ -rewrite", archDoc)
}

// engines are the import paths of the storage engines' libraries.
var engines = []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx"}

// engineFree are the packages that must link no storage engine, directly or through any
// dependency: the store's contract, so that an engine is a choice made beside it
// (store/badgerstore, store/pgstore) and never inside it; the policy that decides on its rows;
// and what travels, so that freshqctl links no store.
var engineFree = []string{"store", "policy", "wire", "cmd/freshqctl"}

// engineDeps returns the dependencies of the package rel (relative to the module) that belong to
// a storage engine.
func engineDeps(t *testing.T, rel string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", module+"/"+rel)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", rel, err)
	}
	var found []string
	for dep := range strings.FieldsSeq(string(out)) {
		for _, e := range engines {
			if dep == e || strings.HasPrefix(dep, e+"/") {
				found = append(found, dep)
			}
		}
	}
	return found
}

func TestContractLinksNoEngine(t *testing.T) {
	for _, rel := range engineFree {
		if deps := engineDeps(t, rel); len(deps) > 0 {
			t.Errorf("%s links a storage engine (%s): it must import only the store's contract", rel, strings.Join(deps, ", "))
		}
	}
}
