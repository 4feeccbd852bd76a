package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/freshq/freshq/wire"
)

// Requests are admitted by their bytes: one that does not fit waits, at most the limiter's
// wait and never past its own context, and is then answered 503 with Retry-After and a JSON
// error. A request whose length is unknown weighs its endpoint's limit; none weighs more than
// the budget, so one alone always fits. It runs in a synctest bubble: the limiter's wait
// passes on the bubble's clock, and synctest.Wait says when a request is blocked waiting.
func TestLimiterAdmitsByBytes(t *testing.T) {
	synctest.Test(t, testLimiterAdmitsByBytes)
}

func testLimiterAdmitsByBytes(t *testing.T) {
	l := NewLimiter(100, 20*time.Millisecond)
	held, err := l.Acquire(context.Background(), 70)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 4)
	h := l.Wrap(1000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}))
	post := func(body string, length int64) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.ContentLength = length
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := post("0123456789", 10); w.Code != http.StatusNoContent {
		t.Fatalf("30 bytes free, a 10-byte body: %d", w.Code)
	}
	w := post("x", -1) // unknown length: weighs the limit, capped at the budget: waits for all 100
	var ae wire.ErrorBody
	json.Unmarshal(w.Body.Bytes(), &ae)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || ae.Error == "" {
		t.Fatalf("over budget: %d %q %+v", w.Code, w.Header().Get("Retry-After"), ae)
	}
	if len(entered) != 1 {
		t.Fatalf("the handler ran %d times", len(entered))
	}
	// The request's context bounds the wait too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Acquire(ctx, 50); !errors.Is(err, ErrBusy) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// A waiting request is admitted as soon as room is given back.
	done := make(chan int)
	go func() { done <- post(strings.Repeat("y", 60), 60).Code }()
	synctest.Wait() // the request is blocked in the limiter's wait
	if len(entered) != 1 {
		t.Fatal("a 60-byte request entered with 30 bytes free")
	}
	held()
	if code := <-done; code != http.StatusNoContent {
		t.Fatalf("after a release: %d", code)
	}
	// A nil Limiter admits everything.
	var none *Limiter
	if rel, err := none.Acquire(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	} else {
		rel()
	}
}
