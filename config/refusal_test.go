package config

import (
	"errors"
	"strings"
	"testing"
)

// refusal is a configuration file and what its error must contain: the key and its line.
type refusal struct{ yaml, want string }

// checkRefusals parses each file and wants it refused with an error containing want, as the
// only problem of the file.
func checkRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml))
		var fes FieldErrors
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		} else if errors.As(err, &fes) && len(fes) != 1 {
			t.Errorf("%q: %d problems (%v), want only %q", tc.yaml, len(fes), err, tc.want)
		}
	}
}
