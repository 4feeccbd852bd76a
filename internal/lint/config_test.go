package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// assemblers are the packages that may depend on config: config itself, the packages that
// narrow it into each package's options (assemble, assemble/settings, and assemble/engine, which
// opens the store engine it names), and the programs that put
// a node (or a simulated one) together from a file: the binaries, the simulator that drives
// the production code from a configuration as worker 0 does, and its report commands. The
// test helper testkit/qtest reads a test's YAML. Every other package, the domain packages,
// gets its settings through the options built by assemble.
var assemblers = []string{"config", "assemble", "assemble/settings", "assemble/engine", "cmd/freshqctl", "cmd/supervisor", "cmd/worker", "node",
	"sim", "sim/freshreport", "sim/simreport", "testkit/qtest"}

// TestOnlyAssemblersDependOnConfig fails when a package outside assemblers depends on config,
// directly or through any chain of imports (go list -deps): a domain package that could read
// the configuration would read it instead of the options it is given, and its tests would no
// longer state every value it runs with.
func TestOnlyAssemblersDependOnConfig(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"/...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		seen++
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if slices.Contains(assemblers, name) {
			continue
		}
		if slices.Contains(p.Deps, module+"/config") {
			t.Errorf("%s depends on config (go list -deps): it must take its settings as options built by assemble", name)
		}
	}
	if seen == 0 {
		t.Fatal("go list listed no package")
	}
}
