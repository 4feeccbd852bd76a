package intake

import (
	"errors"
	"strconv"
	"strings"

	"github.com/freshq/freshq/wire"
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

	// ErrTooMany is returned when what a request would start is at its bound (the sitemap runs
	// in progress, a remote renderer's live leases): retry once some of it is given back.
	ErrTooMany = errors.New("intake: too many in progress")

	// ErrLeaseNotHeld is returned for a lease a remote renderer extends or releases that is no
	// longer the grant it names (lapsed, released, revoked, or never granted). It travels in a
	// *FieldError naming "lease".
	ErrLeaseNotHeld = errors.New("no longer held")

	// ErrBadStoredPage is returned for a stored page that cannot be served as it is: its status
	// is not a final HTTP status (a page stored by an older version or a faulty renderer).
	ErrBadStoredPage = errors.New("intake: stored page not servable")

	// ErrOverloaded is returned by a render on miss (Misses.Wait) refused at once because the
	// renders on miss in flight or the requests waiting are at their cap: retry shortly.
	ErrOverloaded = errors.New("intake: render on miss at its cap")

	// ErrStopping is returned to a request waiting for a render on miss when worker 0 stops:
	// it is answered at once rather than left to time out.
	ErrStopping = errors.New("intake: stopping")

	// ErrWaitTimeout is returned when the render a request waited for did not land within the
	// wait it asked for. The render goes on; a later request may find its page.
	ErrWaitTimeout = errors.New("intake: wait timed out")

	// ErrHostNotAllowed is returned by a render on miss of a page whose host render.domains does
	// not name (an empty list names none for render on miss): nothing was filed.
	ErrHostNotAllowed = errors.New("intake: host not allowed")

	// ErrRateLimited is returned by a render on miss that would create a target of a host past
	// its rate of new targets (serve.miss_rate): nothing was filed; retry after RetryAfterSec
	// (a *RateLimitedError says when).
	ErrRateLimited = errors.New("intake: too many new pages of this host")

	// ErrBackingOff is returned by a render on miss of a known page whose last renders failed
	// and whose failure backoff has not passed: nothing was rushed, so a crawler that retries a
	// failing page again and again costs the origin one render a backoff, not one a request.
	// A *BackingOffError says when to retry.
	ErrBackingOff = errors.New("intake: the page's renders are failing; backing off")

	// ErrRenderFailed is returned when the render a request waited for landed without a page
	// that may be served (a failed fetch, a timeout, a page refused): the answer says its outcome.
	ErrRenderFailed = errors.New("intake: render failed")

	// ErrShardNotOwned fences a result whose key's shard this node no longer holds (a cluster
	// on PostgreSQL): the shard moved while the page rendered, and its new owner grants and
	// renders the row itself.
	ErrShardNotOwned = errors.New("the node no longer owns this key's shard: it moved to another node while the page rendered")
)

// FencedError is returned by Applier.Deliver when every result of a batch was fenced: none
// was applied, because none of their leases is still the grant it was rendered under. Field
// names the first one's lease (results[i].lease); Stats counts the batch.
type FencedError struct {
	Field string
	Msg   string
	Stats wire.ApplyStats
}

func (e *FencedError) Error() string { return "lease not held: " + e.Msg }

// kindError is an error of one of the kinds above (it matches kind with errors.Is) that says
// what happened in words of its own, the message an answer carries. cause, if any, is kept
// for errors.Is and errors.As but not repeated in the message.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

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

// NewFieldError is err, a bad value of the request's field, as a *FieldError: for the
// services outside this package.
func NewFieldError(field string, err error) error { return fieldErr(field, err) }

// NewKindError is an error of kind (one of the errors above, which it matches with errors.Is)
// that says what happened in msg: the message an answer carries.
func NewKindError(kind error, msg string) error { return &kindError{kind: kind, msg: msg} }

// NewKindErrorCause is NewKindError keeping cause for errors.Is and errors.As, not in the message.
func NewKindErrorCause(kind error, msg string, cause error) error {
	return &kindError{kind: kind, msg: msg, cause: cause}
}

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

// RateLimitedError is ErrRateLimited for one host, with when a token is back.
type RateLimitedError struct {
	Host          string
	RetryAfterSec int
}

func (e *RateLimitedError) Error() string {
	return "too many new pages of " + e.Host + " requested at once (serve.miss_rate); retry in " + strconv.Itoa(e.RetryAfterSec) + "s"
}

func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// BackingOffError is ErrBackingOff for one page: its last failure's class and when its row is
// due again.
type BackingOffError struct {
	Class         string
	RetryAfterSec int
}

func (e *BackingOffError) Error() string {
	return "the page's last render failed (" + e.Class + "); it is rendered again in " + strconv.Itoa(e.RetryAfterSec) + "s, not on request"
}

func (e *BackingOffError) Is(target error) bool { return target == ErrBackingOff }

// RetryAfter is the Retry-After, in seconds, that a refusal carries (a *RateLimitedError's
// or a *BackingOffError's); false for any other error.
func RetryAfter(err error) (int, bool) {
	if rl := (*RateLimitedError)(nil); errors.As(err, &rl) {
		return rl.RetryAfterSec, true
	}
	if bo := (*BackingOffError)(nil); errors.As(err, &bo) {
		return bo.RetryAfterSec, true
	}
	return 0, false
}
