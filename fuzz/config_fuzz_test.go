package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
)

// aliasSeeds are configuration files whose aliases and merge keys stand for far more than they
// say: the ten-level, ten-wide alias bomb, the chain of thirty anchors each merging the one
// before twice, a chain of thirty merging the one before once (within the bound), and a bomb
// of merge lists.
func aliasSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"alias-bomb.yaml", "merge-chain.yaml"} {
		b, err := os.ReadFile("../config/testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	var once, lists strings.Builder
	once.WriteString("o0: &m0 {k0: v}\n")
	lists.WriteString("l0: &l0 {a: 1}\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&once, "o%d: &m%d {<<: *m%d, k%d: v}\n", i, i, i-1, i)
		fmt.Fprintf(&lists, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d]\n", i, i, i-1, i-1, i-1, i-1)
	}
	return append(seeds, []byte(once.String()), []byte(lists.String()))
}

// yamlLines is how many lines YAML reads in data: a line break is a CR LF, a lone CR or a
// lone LF (YAML 1.2, 5.4), so a file of old-Mac line ends has as many lines as it shows.
func yamlLines(data []byte) int {
	crlf := bytes.Count(data, []byte("\r\n"))
	return bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) - crlf + 1
}

// FuzzConfigParse feeds arbitrary files to config.Parse, the parse every configuration goes
// through (start, SIGHUP reload, POST /v1/plan): it never panics, and it refuses a file whose
// aliases stand for more than config.MaxAliasNodes nodes before decoding it (the seeds would
// otherwise take gigabytes, or never end). Every refusal wraps config.ErrInvalid, and a line
// it names is one of the file's, counted as YAML counts them (yamlLines).
func FuzzConfigParse(f *testing.F) {
	for _, seed := range aliasSeeds(f) {
		f.Add(seed)
	}
	f.Add([]byte("routes:\n  - {<<: &r {match: prefix, interval: 6h}, name: a, path: /a/}\n  - {<<: *r, name: b, path: /b/}\n"))
	f.Add([]byte("render:\n  user_agents:\n    tablet: *ua\n    mobile: &ua x\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("queue:\n  lease_ttl: 1s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := config.Parse(data)
		if err == nil {
			return
		}
		if !errors.Is(err, config.ErrInvalid) {
			t.Fatalf("%q: %v does not wrap ErrInvalid", data, err)
		}
		lines := yamlLines(data)
		var fe *config.FieldError
		if errors.As(err, &fe) && (fe.Line < 0 || fe.Line > lines) {
			t.Fatalf("%q: line %d of a %d-line file: %v", data, fe.Line, lines, err)
		}
	})
}
