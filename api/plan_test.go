package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/wire"
)

// TestPlanRefusals: POST /v1/plan refuses a body over wire.MaxPlanBody (413), an empty one and
// a file that does not load (400 naming the key, or body, with the line), and a second plan
// while one runs (503 with Retry-After); a good file reaches Compute with its routes.
func TestPlanRefusals(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var got *config.Config
	mux := http.NewServeMux()
	(&Plan{Compute: func(next *config.Config) (wire.Plan, error) {
		got = next
		entered <- struct{}{}
		<-release
		return wire.Plan{Lines: []string{"total: …"}}, nil
	}}).Register(mux)
	post := func(body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, wire.PathPlan, strings.NewReader(body)))
		return rec
	}
	errOf := func(rec *httptest.ResponseRecorder) wire.ErrorBody {
		var e wire.ErrorBody
		json.Unmarshal(rec.Body.Bytes(), &e)
		return e
	}
	if rec := post("# " + strings.Repeat("x", wire.MaxPlanBody)); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("over the bound: %d %s", rec.Code, rec.Body)
	}
	if rec := post(""); rec.Code != http.StatusBadRequest || errOf(rec).Field != "body" {
		t.Fatalf("empty: %d %s", rec.Code, rec.Body)
	}
	if rec := post("routes: ! "); rec.Code != http.StatusBadRequest || errOf(rec).Field != "body" || !strings.Contains(errOf(rec).Error, "line 1") {
		t.Fatalf("bare tag: %d %s", rec.Code, rec.Body)
	}
	if rec := post("queue:\n  lease_ttl: 1s\n"); rec.Code != http.StatusBadRequest || errOf(rec).Field != "queue.lease_ttl" || !strings.Contains(errOf(rec).Error, "line 2") {
		t.Fatalf("invalid value: %d %s", rec.Code, rec.Body)
	}
	good := "routes:\n  - {name: c, match: prefix, path: /c/, interval: 6h}\n"
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(good) }()
	<-entered
	if rec := post(good); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a second plan meanwhile: %d %s", rec.Code, rec.Body)
	}
	close(release)
	if rec := <-done; rec.Code != http.StatusOK || len(got.Routes) != 1 || got.Routes[0].Interval.D().Hours() != 6 {
		t.Fatalf("good file: %d %s, compute saw %+v", rec.Code, rec.Body, got)
	}
}
