package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/testkit/qtest"
	"github.com/freshq/freshq/wire"
)

// TestPlanRefusals: POST /v1/plan refuses a body over wire.MaxPlanBody (413), an empty one and
// a file that does not load (400 naming the key, or body, with the line), and a second plan
// while one runs (503 with Retry-After); a good file reaches Compute with its routes.
func TestPlanRefusals(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var got *policy.Policy
	mux := http.NewServeMux()
	(&Plan{Compute: func(ctx context.Context, file []byte) (wire.Plan, error) {
		next, err := ParsePlanOf(ctx, file)
		if err != nil {
			return wire.Plan{}, err
		}
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
	if rec := <-done; rec.Code != http.StatusOK || len(got.Options().Routes) != 1 || got.Options().Routes[0].Interval.Hours() != 6 {
		t.Fatalf("good file: %d %s, compute saw %+v", rec.Code, rec.Body, got)
	}
}

// The alias bomb (ten levels of ten aliases in render.user_agents, 563 bytes) and the
// merge-key chain (thirty anchors each merging the one before twice) are 400s naming the alias
// that crossed config.MaxAliasNodes, with its line; worker 0's peak heap over twenty of each
// stays within 4 MiB of its level before (decoded, the bomb took gigabytes). A bomb posted
// while a plan runs is refused with 503 before it is parsed: the parse is under the plan lock.
func TestPlanAliasBomb(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	mux := http.NewServeMux()
	(&Plan{Compute: func(ctx context.Context, file []byte) (wire.Plan, error) {
		if _, err := ParsePlanOf(ctx, file); err != nil {
			return wire.Plan{}, err
		}
		entered <- struct{}{}
		<-release
		return wire.Plan{Lines: []string{"total: …"}}, nil
	}}).Register(mux)
	post := func(body []byte) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, wire.PathPlan, bytes.NewReader(body)))
		return rec
	}
	bomb, err := os.ReadFile("../config/testdata/alias-bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	chain, err := os.ReadFile("../config/testdata/merge-chain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body        []byte
		field, line string
	}{{bomb, "render.user_agents.a3[7]", "line 6"}, {chain, "x10.<<[0]", "line 11"}} {
		rec := post(tc.body)
		var e wire.ErrorBody
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusBadRequest || e.Field != tc.field || !strings.Contains(e.Error, tc.line) || !strings.Contains(e.Error, "aliases") {
			t.Fatalf("%d %s; want 400 naming %s at %s", rec.Code, rec.Body, tc.field, tc.line)
		}
		base, peak := qtest.PeakHeapEvery(time.Millisecond, func() {
			for range 20 {
				if rec := post(tc.body); rec.Code != http.StatusBadRequest {
					t.Errorf("%d %s", rec.Code, rec.Body)
				}
			}
		})
		grew := peak - min(base, peak)
		t.Logf("%s: peak heap %.2f MiB above a base of %.1f MiB", tc.field, qtest.MiB(grew), qtest.MiB(base))
		if grew > 4<<20 {
			t.Fatalf("%s: peak heap grew by %.1f MiB, over 4 MiB", tc.field, qtest.MiB(grew))
		}
	}

	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post([]byte("routes:\n  - {name: c, match: prefix, path: /c/, interval: 6h}\n")) }()
	<-entered
	if rec := post(bomb); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a bomb while a plan runs: %d %s; want 503 before parsing", rec.Code, rec.Body)
	}
	close(release)
	if rec := <-done; rec.Code != http.StatusOK {
		t.Fatalf("the plan: %d %s", rec.Code, rec.Body)
	}
}
