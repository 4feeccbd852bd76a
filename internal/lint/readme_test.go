package lint

import (
	"os"
	"regexp"
	"testing"

	"github.com/freshq/freshq/config"
)

// README says which queue.policy is the default; config/defaults.go decides it. Every sentence
// of README that calls a policy the default must name the one config.Default() sets.
func TestReadmeNamesTheDefaultPolicy(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	def := config.Default().Queue.Policy
	claims := regexp.MustCompile("`(?:queue\\.policy: )?(\\w+)`,? (?:the default|stays the default|is the default)").FindAllSubmatch(readme, -1)
	if len(claims) == 0 {
		t.Fatalf("README names no default queue.policy (config's is %s)", def)
	}
	for _, c := range claims {
		if string(c[1]) != def {
			t.Errorf("README: %q, but config/defaults.go's default queue.policy is %s", c[0], def)
		}
	}
}
