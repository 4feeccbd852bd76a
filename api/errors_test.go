package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// Every error the write side answers with has one status, field and message, the answers the
// endpoints gave before the write side moved to intake.
func TestStatusMapsEachErrorOnce(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  int
		field string
		msg   string
	}{
		{&intake.FieldError{Field: "prefix", Err: intake.ErrNotFound}, http.StatusNotFound, "prefix", "no such target"},
		{&intake.FieldError{Field: "device", Err: errors.New("unknown device tv")}, http.StatusBadRequest, "device", "unknown device tv"},
		{&intake.StoreError{Err: errors.New("store: commit: disk full")}, http.StatusServiceUnavailable, "", "store: commit: disk full"},
		{&intake.StoreError{Err: errors.New("disk full")}, http.StatusServiceUnavailable, "", "store: disk full"},
		{fmt.Errorf("not created: %w", &intake.StoreError{Err: errors.New("disk full")}), http.StatusServiceUnavailable, "", "not created: store: disk full"},
		{intake.ErrClosed, http.StatusServiceUnavailable, "", intake.ErrClosed.Error()},
		{&http.MaxBytesError{Limit: 10}, http.StatusRequestEntityTooLarge, "", "body over 10 bytes"},
		{&wire.BodyError{Index: 3, Msg: "unexpected }"}, http.StatusBadRequest, "", "bad JSON at item 3: unexpected }"},
		{&readError{errors.New("reset")}, http.StatusBadRequest, "", "reading the body: reset"},
		{errors.New("a bug"), http.StatusInternalServerError, "", "a bug"},
		// The decoders' errors.
		{withHint(&http.MaxBytesError{Limit: 10}, "split the upload"), http.StatusRequestEntityTooLarge, "", "body over 10 bytes; split the upload"},
		{withHint(&readError{errors.New("reset")}, "split the upload"), http.StatusBadRequest, "", "reading the body: reset"},
		{&declaredTooBig{length: 20, limit: 10}, http.StatusRequestEntityTooLarge, "", "body of 20 bytes, over 10"},
		{errMediaType, http.StatusUnsupportedMediaType, "Content-Type", `use application/json {"url": ...} or an application/xml body`},
		{errEmptyBody, http.StatusBadRequest, "", "empty body"},
		{&spoolError{errors.New("disk full")}, http.StatusServiceUnavailable, "", "spooling the body: disk full"},
		{&badJSON{field: "limit", err: errors.New("cannot unmarshal")}, http.StatusBadRequest, "limit", "bad JSON: cannot unmarshal"},
		{&badBatch{field: "results[2].key", err: errors.New("truncated")}, http.StatusBadRequest, "results[2].key", "bad results batch: truncated"},
		{&wire.FieldError{Field: "results[0].lease", Err: errors.New(`unknown field "x"`)}, http.StatusBadRequest, "results[0].lease", `unknown field "x"`},
		{busyRefusal{}, http.StatusServiceUnavailable, "", "worker 0 is busy with other large requests; retry after a moment"},
		// The services' errors beyond the write side's.
		{&intake.FencedError{Field: "results[0].lease", Msg: "shm: lease not held"}, http.StatusConflict, "results[0].lease", "lease not held: shm: lease not held"},
		{&intake.FieldError{Field: "lease", Err: intake.ErrLeaseNotHeld}, http.StatusConflict, "lease", "no longer held"},
		{&intake.FieldError{Field: "limit", Err: fmt.Errorf("renderer a holds 4: %w", intake.ErrTooMany)}, http.StatusTooManyRequests, "limit", "renderer a holds 4: intake: too many in progress"},
		{fmt.Errorf("status 42: %w", intake.ErrBadStoredPage), http.StatusBadGateway, "", "status 42: intake: stored page not servable"},
		{&intake.FieldError{Field: "lease.slot", Err: errors.New("out of range")}, http.StatusBadRequest, "lease.slot", "out of range"},
		// Render on miss (GET /v1/pages?wait=).
		{fmt.Errorf("the render ended timeout: %w", intake.ErrRenderFailed), http.StatusBadGateway, "", "the render ended timeout: intake: render failed"},
		{fmt.Errorf("not within 2s: %w", intake.ErrWaitTimeout), http.StatusGatewayTimeout, "", "not within 2s: intake: wait timed out"},
		{fmt.Errorf("3 waiting: %w", intake.ErrOverloaded), http.StatusServiceUnavailable, "", "3 waiting: intake: render on miss at its cap"},
		{intake.ErrStopping, http.StatusServiceUnavailable, "", "intake: stopping"},
		{&intake.BackingOffError{Class: "http_5xx", RetryAfterSec: 60}, http.StatusServiceUnavailable, "", "the page's last render failed (http_5xx); it is rendered again in 60s, not on request"},
		{&intake.FieldError{Field: "wait", Err: errNoMisses}, http.StatusBadRequest, "wait", errNoMisses.Error()},
	} {
		code, field, msg := status(tc.err)
		if code != tc.code || field != tc.field || msg != tc.msg {
			t.Errorf("%#v: %d %q %q, want %d %q %q", tc.err, code, field, msg, tc.code, tc.field, tc.msg)
		}
	}
}

// What fail adds to status's answer: Retry-After for a refusal of the Limiter, and the counts of
// a batch whose every result was fenced.
func TestFailAddsWhatTheAnswerCarries(t *testing.T) {
	w := httptest.NewRecorder()
	fail(w, busyRefusal{})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("busy: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	w = httptest.NewRecorder()
	fail(w, &intake.FencedError{Field: "results[0].lease", Msg: "gone", Stats: wire.ApplyStats{Fenced: 1}})
	var body wire.FencedBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != http.StatusConflict ||
		body.Field != "results[0].lease" || body.Error != "lease not held: gone" || body.Fenced != 1 {
		t.Fatalf("fenced: %d %s (%v)", w.Code, w.Body, err)
	}
}
