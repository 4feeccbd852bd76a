package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/freshq/freshq/intake"
)

// maxWaitParam bounds the length of ?wait= read as a duration: "10s" needs 3 bytes, and no
// accepted wait needs more than a few.
const maxWaitParam = 32

// errWaitIsAWrite is a GET or HEAD /v1/pages with ?wait=: render on miss files and rushes a
// target, and neither ever writes on the admin listener (any page an operator has open can
// send one).
var errWaitIsAWrite = errors.New("render on miss writes: send it as POST /v1/pages?url=...&wait=... (a GET never writes)")

// errNoMisses is a ?wait= sent to a server that has no render on miss (a handler built
// without misses.Flights).
var errNoMisses = errors.New("render on miss is not available on this server")

// waitOf reads ?wait= of POST /v1/pages: absent, it is 0 (serve what is stored, as always);
// otherwise a Go duration (10s, 1m) that must be positive and at most page.max_wait, or a
// *intake.FieldError naming "wait".
func waitOf(r *http.Request, maxWait time.Duration) (time.Duration, error) {
	q := r.URL.Query()
	if !q.Has("wait") {
		return 0, nil
	}
	raw := q.Get("wait")
	bad := func(format string, args ...any) error {
		return &intake.FieldError{Field: "wait", Err: fmt.Errorf(format, args...)}
	}
	if len(raw) > maxWaitParam {
		return 0, bad("%d bytes, at most %d", len(raw), maxWaitParam)
	}
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return 0, bad("%q is not a duration (e.g. 10s)", raw)
	case d <= 0:
		return 0, bad("%s: must be positive", d)
	case d > maxWait:
		return 0, bad("%s: at most %s (page.max_wait)", d, maxWait)
	}
	return d, nil
}

// servedPage is the page GET and POST /v1/pages answer with: the stored one, or with POST and
// ?wait= the one rendered on miss for it (misses.Flights.Wait).
func (o *Operate) servedPage(r *http.Request, key []byte) (intake.ServedPage, error) {
	if r.Method != http.MethodPost && r.URL.Query().Has("wait") { // GET and HEAD never write
		return intake.ServedPage{}, &intake.FieldError{Field: "wait", Err: errWaitIsAWrite}
	}
	// Without render on miss any wait is refused below (errNoMisses), once it parses.
	maxWait := time.Duration(math.MaxInt64)
	if o.Misses != nil {
		maxWait = o.Misses.Settings().MaxWait
	}
	wait, err := waitOf(r, maxWait)
	if err != nil {
		return intake.ServedPage{}, err
	}
	if wait == 0 {
		return o.intake().Page(key)
	}
	if o.Misses == nil {
		return intake.ServedPage{}, &intake.FieldError{Field: "wait", Err: errNoMisses}
	}
	q := r.URL.Query()
	return o.Misses.Wait(r.Context(), key, q.Get("url"), q.Get("device"), wait)
}
