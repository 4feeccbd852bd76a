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

// The render-on-miss bounds are refused out of range, each with its line: a waiter count of
// zero would refuse every wait, and a wait longer than MaxWaitMax would hold connections for it.
func TestPageWaitBoundsAreValidated(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"page:\n  max_waiters: -1\n", "line 2: page.max_waiters: must be 1..1048576, got -1"},
		{"page:\n  max_waiters: 0\n", "line 2: page.max_waiters"},
		{"page:\n  max_wait: 11m\n", "line 2: page.max_wait: must be at most 10m0s"},
		{"page:\n  max_wait: -1s\n", "line 2: page.max_wait: must be a positive duration"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
	c, err := Parse([]byte("page:\n  max_waiters: 100\n  max_wait: 5s\n"))
	if err != nil || c.Page.MaxWaiters != 100 || c.Page.MaxWait != Duration(5e9) {
		t.Fatalf("%+v %v", c.Page, err)
	}
}
