package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/freshq/freshq"

// allowed is, for every package of freshq (its path below the module), the packages of freshq its
// non-test files may import. It is exact: an import not listed fails, and so does a listed one
// the package no longer makes, so the table (and the package table and the layers generated
// from it in docs/ARCHITECTURE.md, archdoc_test.go) never flatters the code.
var allowed = map[string][]string{
	"testkit/timers":        {},
	"leases":                {"cachekey", "claim", "hosts", "intake", "policy", "shm", "store", "wire"},
	"apply":                 {"cachekey", "claim", "freshness", "hosts", "intake", "leases", "outcome", "pagedigest", "policy", "render", "shm", "store", "verdict", "wire"},
	"misses":                {"cachekey", "intake", "render"},
	"sitemapruns":           {"cachekey", "intake", "internal/startstop", "render", "sitemap", "wire"},
	"api":                   {"apply", "claim", "crawlers", "hosts", "intake", "leases", "misses", "policy", "renderlog", "shm", "sitemapruns", "wire"},
	"assemble":              {"cachekey", "config", "hosts", "policy", "render", "render/chrome", "shm"},
	"assemble/settings":     {"api", "assemble", "capacity", "claim", "config", "crawlers", "intake", "misses", "policy", "serve", "sitemap", "sitemapruns", "sweep", "wire"},
	"assemble/engine":       {"assemble", "cluster", "config", "shm", "store", "store/badgerstore", "store/pgstore", "store/pgstore/pgcluster", "sweep"},
	"cachekey":              {},
	"capacity":              {"freshness", "internal/startstop", "policy", "store", "wire"},
	"claim":                 {"hosts", "policy", "shm", "store"},
	"cluster":               {"internal/startstop", "shm", "store", "wire"},
	"cluster/clustertest":   {"cluster", "store"},
	"cmd/freshqctl":         {"cmd/freshqctl/clitext", "cmd/freshqctl/top", "wire"},
	"cmd/freshqctl/clitext": {},
	"cmd/freshqctl/top":     {"cmd/freshqctl/clitext", "wire"},
	"cmd/supervisor":        {"assemble", "config", "hosts", "internal/logging", "internal/testhold", "shm", "shmmetrics", "supervise/admin", "supervise/listeners", "supervise/pool", "supervise/rundir", "supervise/sdnotify", "supervise/ui", "wire"},
	"cmd/worker":            {"assemble/engine", "cluster", "config", "internal/clock", "internal/grantlog", "internal/logging", "internal/testhold", "node", "shm", "store"},
	"node":                  {"api", "apply", "assemble", "assemble/settings", "capacity", "claim", "cluster", "config", "crawlers", "freshness", "hosts", "intake", "internal/clock", "internal/connguard", "internal/grantlog", "internal/startstop", "misses", "policy", "render", "render/chrome", "render/chrome/nice", "renderlog", "renderloop", "serve", "shm", "sitemapruns", "store", "sweep", "sweeploop", "verdict", "wire"},
	"config":                {"cachekey", "config/yamlfile", "crawlers", "verdict", "wire"},
	"config/yamlfile":       {},
	"console":               {"wire"},
	"crawlers":              {},
	"freshness":             {},
	"pagedigest":            {},
	"verdict":               {},
	"fuzz":                  {},
	"hosts":                 {"cachekey", "internal/startstop", "outcome", "policy", "shm", "store", "wire"},
	"intake":                {"cachekey", "freshness", "hosts", "policy", "render", "shm", "store", "verdict", "wire"},
	"internal/clock":        {},
	"internal/connguard":    {},
	"internal/grantlog":     {},
	"testkit/intaketest":    {"apply", "intake"},
	"internal/invariants":   {},
	"internal/lint":         {},
	"internal/logging":      {},
	"testkit/pgtest":        {},
	"testkit/qtest":         {"assemble", "config", "policy", "shm", "store", "store/badgerstore"},
	"internal/startstop":    {},
	"testkit/testbin":       {},
	"testkit/testdns":       {},
	"internal/testhold":     {},
	"outcome":               {},
	"policy":                {"cachekey", "outcome", "store"},
	"renderlog":             {"cachekey", "wire"},
	"render":                {"outcome"},
	"render/chrome":         {"outcome", "render", "render/chrome/netidle", "render/chrome/nice"},
	"render/chrome/netidle": {},
	"render/chrome/nice":    {},
	"renderloop":            {"api", "cachekey", "claim", "hosts", "internal/startstop", "outcome", "render", "render/chrome", "shm", "wire"},
	"serve":                 {"cachekey", "crawlers", "intake", "internal/connguard", "misses", "render", "wire"},
	"shm":                   {"shm/hosttable"},
	"shm/hosttable":         {},
	"shmmetrics":            {"hosts", "internal/clock", "outcome", "shm", "wire"},
	"sim":                   {"assemble", "assemble/settings", "cachekey", "capacity", "claim", "config", "freshness", "outcome", "policy", "shm", "store", "sweep"},
	"sim/freshreport":       {"config", "sim"},
	"sim/simreport":         {"config", "sim"},
	"sitemap":               {"cachekey", "policy", "render"},
	"store":                 {},
	"store/badgerstore": {"internal/invariants", "store", "store/badgerstore/internal/dueorder", "store/badgerstore/internal/funnel",
		"store/badgerstore/internal/keyfilter", "store/badgerstore/internal/keyspace", "store/badgerstore/internal/readcache"},
	"store/badgerstore/internal/dueorder":  {"internal/invariants", "store", "store/badgerstore/internal/keyspace"},
	"store/badgerstore/internal/funnel":    {"internal/invariants", "store", "store/badgerstore/internal/keyfilter", "store/badgerstore/internal/keyspace", "store/badgerstore/internal/readcache"},
	"store/badgerstore/internal/keyfilter": {"cachekey", "store", "store/badgerstore/internal/keyspace"},
	"store/badgerstore/internal/keyspace":  {"store"},
	"store/badgerstore/internal/readcache": {},
	"store/pgstore":                        {"store", "store/pgstore/pgschema"},
	"store/pgstore/pgcluster":              {"store", "store/pgstore"},
	"store/pgstore/pgschema":               {},
	"store/storetest":                      {"internal/invariants", "store"},
	"supervise/admin":                      {"console", "internal/connguard", "wire"},
	"supervise/listeners":                  {},
	"supervise/pool":                       {"shm"},
	"supervise/rundir":                     {"shm"},
	"supervise/sdnotify":                   {"shm", "wire"},
	"supervise/ui":                         {"console", "internal/clock", "shm", "wire"},
	"sweep":                                {"hosts", "policy", "shm", "store"},
	"sweeploop":                            {"claim", "internal/startstop", "shm", "sweep"},
	"wire":                                 {"outcome"},
}

// leafRules are the imports internal/lint's package doc states in words for the packages at
// the bottom of the picture; TestLeafRulesAreTheTable holds the words to the table.
var leafRules = map[string][]string{
	"shm": {"shm/hosttable"}, "outcome": {}, "cachekey": {}, "store": {},
	"wire":   {"outcome"},
	"policy": {"cachekey", "outcome", "store"},
}

func TestLeafRulesAreTheTable(t *testing.T) {
	for name, want := range leafRules {
		got := slices.Sorted(slices.Values(allowed[name]))
		if !slices.Equal(got, want) {
			t.Errorf("internal/lint's doc says %s imports %v of freshq; the table says %v: change the one that is wrong", name, want, got)
		}
	}
}

// testHelpers may be imported by tests only.
var testHelpers = []string{"testkit/qtest", "testkit/pgtest", "testkit/testdns", "testkit/testbin", "testkit/timers",
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
