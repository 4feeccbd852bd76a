package config

import (
	"errors"
	"strings"
	"testing"
)

// Validate reports every problem of a file at once, each with its line, so that an operator
// fixes a file in one pass instead of one error per restart.
func TestValidateReportsEveryProblem(t *testing.T) {
	_, err := Parse([]byte("workers: 300\nqueue:\n  lease_ttl: 1m\nrender:\n  timeout: 30s\n  concurrency: 5000\nhttp:\n  max_conns: -1\n"))
	want := []string{"line 1: workers", "line 3: queue.lease_ttl", "line 6: render.concurrency", "line 8: http.max_conns"}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v: missing %q", err, w)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v is not ErrInvalid", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%q: not one line", err)
	}
	var fes FieldErrors
	if !errors.As(err, &fes) || len(fes) != len(want) {
		t.Fatalf("%v: want %d FieldErrors", err, len(want))
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe != fes[0] || fe.Line != 1 {
		t.Fatalf("errors.As finds %+v, want the first problem with its line", fe)
	}
	for _, fe := range fes {
		if fe.Line == 0 {
			t.Errorf("%s has no line", fe.Path)
		}
	}
	// One problem reads as the FieldError it is.
	_, err = Parse([]byte("workers: 300\n"))
	if err == nil || err.Error() != "config: line 1: workers: must be 1..256, got 300" {
		t.Fatalf("got %v", err)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults: %v", err) // a nil FieldErrors must not come back as a non-nil error
	}
}
