package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
)

// Heavy-request admission. Worker 0 is one process holding the store: a burst of large
// requests (result batches carrying pages, bulk target uploads, sitemap bodies) must not add
// up to more memory than it can spare, whatever each one's own limit is. A Limiter is a
// byte budget shared by every heavy endpoint: a request is admitted with a weight, the bytes
// it may hold (its Content-Length, or its endpoint's bound when the length is unknown or
// larger), and gives them back when its handler returns. An endpoint that reads its body whole
// (results) is bounded by its body limit; one that streams (target uploads, sitemap bodies
// spooled to disk) by the working set it keeps, whatever the body's size.
//
// A request that does not fit waits, at most DefaultHeavyWait and never past its own context,
// then is answered 503 with Retry-After and a JSON error. It waits rather than failing at
// once because the bursts are short (render workers deliver batches as renders finish) and a
// waiting request has not read its body, so it costs a goroutine and kernel buffers, not heap;
// it stops waiting so that a client is told to back off instead of hanging.

// Heavy-request defaults.
const (
	// DefaultHeavyBytes is worker 0's budget for the bodies of heavy requests in flight at
	// once: a full result batch and a bulk upload fit together.
	DefaultHeavyBytes = 128 << 20
	// DefaultHeavyWait is how long a request waits for room before it is refused.
	DefaultHeavyWait = 5 * time.Second
	heavyRetryAfter  = 2 // seconds, in Retry-After
)

// ErrBusy is returned by Limiter.Acquire when the budget stayed taken for the whole wait.
var ErrBusy = errors.New("api: heavy requests over budget")

// Limiter is a byte budget for heavy requests. The zero value is not usable; a nil *Limiter
// admits everything (tests and tools that do not bound).
type Limiter struct {
	sem    *semaphore.Weighted
	budget int64
	wait   time.Duration
}

// NewLimiter returns a Limiter of budget bytes whose requests wait at most wait for room
// (0: DefaultHeavyWait).
func NewLimiter(budget int64, wait time.Duration) *Limiter {
	if wait <= 0 {
		wait = DefaultHeavyWait
	}
	return &Limiter{sem: semaphore.NewWeighted(budget), budget: budget, wait: wait}
}

// Budget is the limiter's size in bytes (0 for a nil Limiter).
func (l *Limiter) Budget() int64 {
	if l == nil {
		return 0
	}
	return l.budget
}

// Weight is what a request whose handler holds at most limit bytes is admitted with: its
// Content-Length when known and within the limit, else the limit, never more than the budget
// (so that one request alone always fits).
func (l *Limiter) Weight(r *http.Request, limit int64) int64 {
	n := limit
	if r.ContentLength >= 0 && r.ContentLength < limit {
		n = r.ContentLength
	}
	return max(1, min(n, l.Budget()))
}

// Acquire takes n bytes of the budget, waiting at most the limiter's wait and never past ctx.
// The returned function gives them back; it is safe to call once. A nil Limiter admits at once.
func (l *Limiter) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if l == nil {
		return func() {}, nil
	}
	n = max(1, min(n, l.budget))
	if !l.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, l.wait)
		defer cancel()
		if err := l.sem.Acquire(wctx, n); err != nil {
			return nil, fmt.Errorf("%w: %d bytes wanted of %d", ErrBusy, n, l.budget)
		}
	}
	return func() { l.sem.Release(n) }, nil
}

// Wrap admits each request to h with Weight(r, limit), answering 503 (Retry-After, JSON error)
// when the budget stays taken. limit is the most h holds in memory for one request: its body
// limit if it reads the body whole (and then h must refuse a longer body itself, with
// http.MaxBytesReader: the weight trusts Content-Length only below the limit), its working set
// if it streams. A nil Limiter returns h.
func (l *Limiter) Wrap(limit int64, h http.Handler) http.Handler {
	if l == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := l.Acquire(r.Context(), l.Weight(r, limit))
		if err != nil {
			RefuseBusy(w)
			return
		}
		defer release()
		h.ServeHTTP(w, r)
	})
}

// RefuseBusy answers a request the limiter could not admit: 503 with Retry-After (status).
func RefuseBusy(w http.ResponseWriter) { fail(w, busyRefusal{}) }

// busyRefusal is ErrBusy in the words a refused request is told.
type busyRefusal struct{}

func (busyRefusal) Error() string {
	return "worker 0 is busy with other large requests; retry after a moment"
}
func (busyRefusal) Is(target error) bool { return target == ErrBusy }
