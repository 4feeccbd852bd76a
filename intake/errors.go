package intake

import (
	"errors"
	"strings"
)

// These errors are what the write side answers with; package api maps each to one HTTP
// status (api's status function), so a caller branches on them with errors.Is and errors.As.
var (
	// ErrNotFound is returned when the target an operation names is not stored (a delete, a
	// rush or wait that matched nothing). It travels in a *FieldError naming the request's
	// field that named the target.
	ErrNotFound = errors.New("no such target")

	// ErrStore is matched by every failure of the store to read or commit (a *StoreError):
	// nothing of the failed write landed, and the caller may retry it.
	ErrStore = errors.New("store failure")

	// ErrClosed is returned by a write attempted through a Gate after Shut: the writes of the
	// service it guards (the sitemap runs) are stopping.
	ErrClosed = errors.New("intake: writes stopped")
)

// FieldError is a bad value in a request, with the name of its field. Its Error is the
// message alone, as an answer's "error" carries it beside "field".
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErr builds a *FieldError.
func fieldErr(field string, err error) error { return &FieldError{Field: field, Err: err} }

// StoreError is a failure of the store while writing or reading for a write. It matches
// ErrStore and unwraps to the store's own error.
type StoreError struct{ Err error }

// Error names the store once: the funnel's errors already start with "store:".
func (e *StoreError) Error() string {
	if msg := e.Err.Error(); strings.HasPrefix(msg, "store:") {
		return msg
	}
	return "store: " + e.Err.Error()
}
func (e *StoreError) Unwrap() error        { return e.Err }
func (e *StoreError) Is(target error) bool { return target == ErrStore }
