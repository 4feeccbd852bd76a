package api

import (
	"errors"
	"fmt"
	"net/http"
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
	} {
		code, field, msg := status(tc.err)
		if code != tc.code || field != tc.field || msg != tc.msg {
			t.Errorf("%#v: %d %q %q, want %d %q %q", tc.err, code, field, msg, tc.code, tc.field, tc.msg)
		}
	}
}
