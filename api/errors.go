package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// status maps an error a handler got, from intake or from reading its request, to its answer:
// the HTTP status, the field to name ("" for none) and the message. It is the one place the
// write side's errors become statuses:
//   - a body over its limit (*http.MaxBytesError): 413;
//   - a malformed body (*wire.BodyError, or a read that failed): 400;
//   - intake.ErrNotFound: 404, naming the field that named the target;
//   - intake.ErrStore and intake.ErrClosed: 503, worth retrying;
//   - an *intake.FieldError: 400, naming its field;
//   - anything else: 500.
func status(err error) (code int, field, msg string) {
	msg = err.Error()
	var fe *intake.FieldError
	if errors.As(err, &fe) {
		field = fe.Field
	}
	var tooBig *http.MaxBytesError
	var bad *wire.BodyError
	var read *readError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "", fmt.Sprintf("body over %d bytes", tooBig.Limit)
	case errors.As(err, &bad), errors.As(err, &read):
		return http.StatusBadRequest, field, msg
	case errors.Is(err, intake.ErrNotFound):
		return http.StatusNotFound, field, msg
	case errors.Is(err, intake.ErrStore), errors.Is(err, intake.ErrClosed):
		return http.StatusServiceUnavailable, field, msg
	case fe != nil:
		return http.StatusBadRequest, field, msg
	}
	return http.StatusInternalServerError, field, msg
}

// fail answers err as status maps it.
func fail(w http.ResponseWriter, err error) {
	code, field, msg := status(err)
	writeError(w, code, field, msg)
}

// readError is a request body that could not be read (the connection failed mid-body).
type readError struct{ err error }

func (e *readError) Error() string { return "reading the body: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
