package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/wire"
)

// status is the one place an error becomes an answer: the HTTP status, the field to name (""
// for none) and the message. A handler decodes, calls, and hands any error to fail, which
// answers with what status says; no handler picks a status of its own. The table, first match
// wins:
//
//	error                                   status  field            message
//	*http.MaxBytesError (a body too long)   413     -                body over N bytes[; hint]
//	*declaredTooBig (Content-Length)        413     -                body of N bytes, over M
//	errMediaType                            415     Content-Type     what to send instead
//	ErrBusy (the Limiter refused)           503     -                worker 0 is busy... (Retry-After)
//	*spoolError                             503     -                spooling the body: ...
//	*wire.BodyError, *badJSON, *badBatch,   400     the decoder's    the decoder's
//	  *readError, errEmptyBody
//	*intake.FencedError (all fenced)        409     results[i].lease lease not held: ... (+ the ApplyStats)
//	intake.ErrLeaseNotHeld                  409     lease            no longer held...
//	intake.ErrNotFound, ErrHostNotAllowed   404     what named it    ...
//	errNotClustered (/v1/cluster on Badger) 404     store.backend    not in a cluster
//	intake.ErrTooMany                       429     the bound's      ...
//	intake.ErrBadStoredPage                 502     -                ...
//	intake.ErrRenderFailed (render on miss) 502     -                the render's outcome
//	intake.ErrWaitTimeout (render on miss)  504     -                not rendered within ...
//	intake.ErrOverloaded, ErrStopping       503     -                ... (Retry-After: 1)
//	intake.ErrRateLimited, ErrBackingOff    503     -                ... (Retry-After: its own)
//	intake.ErrStore, intake.ErrClosed       503     -                ... (worth retrying)
//	*intake.FieldError, *wire.FieldError    400     its field        its message
//	anything else                           500     -                the error
//
// A success is answered by ok, created or accepted, below, with its own status.
func status(err error) (code int, field, msg string) {
	msg = err.Error()
	var ife *intake.FieldError
	var wfe *wire.FieldError
	switch {
	case errors.As(err, &ife):
		field = ife.Field
	case errors.As(err, &wfe):
		field = wfe.Field
	}
	var (
		tooBig   *http.MaxBytesError
		declared *declaredTooBig
		spool    *spoolError
		body     *wire.BodyError
		bad      *badJSON
		batch    *badBatch
		read     *readError
		fenced   *intake.FencedError
	)
	switch {
	case errors.As(err, &tooBig):
		msg = fmt.Sprintf("body over %d bytes", tooBig.Limit)
		var h *hinted
		if errors.As(err, &h) {
			msg += "; " + h.hint
		}
		return http.StatusRequestEntityTooLarge, "", msg
	case errors.As(err, &declared):
		return http.StatusRequestEntityTooLarge, "", msg
	case errors.Is(err, errMediaType):
		return http.StatusUnsupportedMediaType, "Content-Type", msg
	case errors.Is(err, ErrBusy), errors.As(err, &spool):
		return http.StatusServiceUnavailable, "", msg
	case errors.As(err, &bad):
		return http.StatusBadRequest, bad.field, msg
	case errors.As(err, &batch):
		return http.StatusBadRequest, batch.field, msg
	case errors.As(err, &body), errors.As(err, &read), errors.Is(err, errEmptyBody):
		return http.StatusBadRequest, field, msg
	case errors.As(err, &fenced):
		return http.StatusConflict, fenced.Field, msg
	case errors.Is(err, intake.ErrLeaseNotHeld):
		return http.StatusConflict, field, msg
	case errors.Is(err, intake.ErrNotFound), errors.Is(err, intake.ErrHostNotAllowed):
		return http.StatusNotFound, field, msg
	case errors.Is(err, errNotClustered):
		return http.StatusNotFound, "store.backend", msg
	case errors.Is(err, intake.ErrTooMany):
		return http.StatusTooManyRequests, field, msg
	case errors.Is(err, intake.ErrBadStoredPage), errors.Is(err, intake.ErrRenderFailed):
		return http.StatusBadGateway, field, msg
	case errors.Is(err, intake.ErrWaitTimeout):
		return http.StatusGatewayTimeout, field, msg
	case errors.Is(err, intake.ErrOverloaded), errors.Is(err, intake.ErrStopping), errors.Is(err, intake.ErrRateLimited),
		errors.Is(err, intake.ErrBackingOff):
		return http.StatusServiceUnavailable, field, msg
	case errors.Is(err, intake.ErrStore), errors.Is(err, intake.ErrClosed):
		return http.StatusServiceUnavailable, field, msg
	case ife != nil, wfe != nil:
		return http.StatusBadRequest, field, msg
	}
	return http.StatusInternalServerError, field, msg
}

// fail answers err as status maps it. An answer that carries more than the error says so
// here: a refusal of the Limiter says when to retry, and a batch whose every result was
// fenced carries its counts beside the error.
func fail(w http.ResponseWriter, err error) {
	code, field, msg := status(err)
	if errors.Is(err, ErrBusy) {
		w.Header().Set("Retry-After", strconv.Itoa(heavyRetryAfter))
	}
	if errors.Is(err, intake.ErrOverloaded) || errors.Is(err, intake.ErrStopping) {
		w.Header().Set("Retry-After", "1") // a render on miss frees its slot within seconds
	}
	if after, ok := intake.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(after))
	}
	var fenced *intake.FencedError
	if errors.As(err, &fenced) {
		wire.WriteJSON(w, code, wire.FencedBody{ErrorBody: wire.ErrorBody{Error: msg, Field: field}, ApplyStats: fenced.Stats})
		return
	}
	wire.WriteError(w, code, field, msg)
}

// failWith answers v, a body that reports a failure in its own shape (a targets upload's
// counts), with the status err maps to.
func failWith(w http.ResponseWriter, err error, v any) {
	code, _, _ := status(err)
	wire.WriteJSON(w, code, v)
}

// The successes: 200 with v, 201 for something created, 202 for something started.
func ok(w http.ResponseWriter, v any)       { wire.WriteJSON(w, http.StatusOK, v) }
func created(w http.ResponseWriter, v any)  { wire.WriteJSON(w, http.StatusCreated, v) }
func accepted(w http.ResponseWriter, v any) { wire.WriteJSON(w, http.StatusAccepted, v) }

// The errors of decoding a request: api's own, because reading a request is its job.
var (
	errMediaType = errors.New(`use application/json {"url": ...} or an application/xml body`)
	errEmptyBody = errors.New("empty body")
)

// readError is a request body that could not be read (the connection failed mid-body).
type readError struct{ err error }

func (e *readError) Error() string { return "reading the body: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// bodyError is what a failed read of a body is: the *http.MaxBytesError of a body over its
// limit as it is, anything else a *readError.
func bodyError(err error) error {
	if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
		return err
	}
	return &readError{err}
}

// declaredTooBig is a body whose Content-Length is over its limit: refused before any of it
// is read.
type declaredTooBig struct{ length, limit int64 }

func (e *declaredTooBig) Error() string {
	return fmt.Sprintf("body of %d bytes, over %d", e.length, e.limit)
}

// badJSON is a JSON body that does not decode, with the field the decoder could name.
type badJSON struct {
	field string
	err   error
}

func (e *badJSON) Error() string { return "bad JSON: " + e.err.Error() }
func (e *badJSON) Unwrap() error { return e.err }

// badBatch is a binary results batch that does not decode, with the field it names.
type badBatch struct {
	field string
	err   error
}

func (e *badBatch) Error() string { return "bad results batch: " + e.err.Error() }
func (e *badBatch) Unwrap() error { return e.err }

// spoolError is a posted body that could not be spooled to a temporary file.
type spoolError struct{ err error }

func (e *spoolError) Error() string { return "spooling the body: " + e.err.Error() }
func (e *spoolError) Unwrap() error { return e.err }

// hinted is a body over its limit with what the client should do instead.
type hinted struct {
	error
	hint string
}

func (e *hinted) Unwrap() error { return e.error }

// withHint adds hint to err when err is a body over its limit; any other error is returned as
// it is.
func withHint(err error, hint string) error {
	if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
		return &hinted{err, hint}
	}
	return err
}
