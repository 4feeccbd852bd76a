package config

import (
	"path/filepath"
	"reflect"
	"testing"
)

// The cluster example of docs/CLUSTER.md is three files that load as they are,
// on PostgreSQL, and differ in node.id, listen and data_dir only: every node of a cluster must
// share the rest (the database, the routes), and no two may share those three on one machine.
func TestClusterExamplesLoadAndDifferOnlyWhereTheyMust(t *testing.T) {
	files, err := filepath.Glob("../examples/cluster/*.yaml")
	if err != nil || len(files) != 3 {
		t.Fatalf("examples/cluster/*.yaml: %v %v, want three files", files, err)
	}
	var first *Config
	seen := map[string]bool{}
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Store.Backend != StoreBackendPostgres {
			t.Fatalf("%s: store.backend %q", f, c.Store.Backend)
		}
		for _, v := range []string{"node.id=" + c.Node.ID, "listen=" + c.Listen, "data_dir=" + c.DataDir} {
			if seen[v] {
				t.Errorf("%s: %s shared with another node", f, v)
			}
			seen[v] = true
		}
		if c.Node.ID == "" {
			t.Errorf("%s: no node.id", f)
		}
		rest := *c
		rest.Node.ID, rest.Listen, rest.DataDir = "", "", ""
		if first == nil {
			first = &rest
		} else if !reflect.DeepEqual(*first, rest) {
			t.Errorf("%s differs from %s in more than node.id, listen and data_dir", f, files[0])
		}
	}
}
