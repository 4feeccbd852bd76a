package outcome

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// The names are part of the API (the results batch, JSON results, metric labels): pinned here.
func TestNames(t *testing.T) {
	want := []string{"ok", "noindex", "not_found", "gone", "client_error", "server_error",
		"timeout", "network", "redirect_loop", "too_large", "blocked", "failed"}
	var got []string
	for _, o := range All() {
		got = append(got, o.String())
		if p, ok := Parse(o.String()); !ok || p != o {
			t.Errorf("Parse(%q) = %v, %v; want %v", o.String(), p, ok, o)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("names %q, want %q", got, want)
	}
	if Outcome(0).Valid() || Outcome(0).String() != "outcome(0)" || Outcome(13).String() != "outcome(13)" {
		t.Error("the zero value must not be a valid outcome, and out-of-range values must say so")
	}
	for _, bad := range []string{"", "OK", "outcome(1)", "teapot"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestResponse(t *testing.T) {
	var got []Outcome
	for _, o := range All() {
		if o.Response() {
			got = append(got, o)
		}
	}
	if want := []Outcome{OK, Noindex, NotFound, Gone, ClientError, ServerError}; !slices.Equal(got, want) {
		t.Fatalf("responses %v, want %v", got, want)
	}
}

// outcome is a leaf: wire imports it, and wire must link nothing else of freshq.
func TestImportsNothingOfFreshq(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "github.com/freshq/freshq/") {
			t.Errorf("outcome imports %s", imp)
		}
	}
}

// The stage names travel like the outcomes' (the results batch, logs, a row's last attempt):
// pinned here, in the one list render and wire share.
func TestStageNames(t *testing.T) {
	want := []string{"policy", "dial", "request", "headers", "body", "exec", "browser", "navigate", "ready"}
	if got := Stages(); !slices.Equal(got, want) {
		t.Fatalf("stages %q, want %q", got, want)
	}
}
