package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/freshq/freshq/assemble"
	"github.com/freshq/freshq/assemble/settings"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/freshq/freshq/api"
	"github.com/freshq/freshq/capacity"
	"github.com/freshq/freshq/config"
	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
	"github.com/freshq/freshq/store/badgerstore"
	"github.com/freshq/freshq/wire"
)

// FuzzCapacityDecode feeds arbitrary bodies to the supervisor's decoder of worker 0's capacity
// view (GET /internal/capacity): never a panic; an accepted view re-encodes and decodes to the
// same view; a body past wire.MaxCapacityBody is never read whole.
func FuzzCapacityDecode(f *testing.F) {
	var v wire.Capacity
	v.NowMs = 1_800_000_000_000
	v.Demand.Total, v.Demand.Rows = 0.25, 9000
	v.Demand.ByLane = map[string]float64{"urgent": 0, "submitted": 0.2, "discovered": 0.05, "cold": 0}
	v.Demand.ByRoute = map[string]float64{"": 0.01, "catalog": 0.24}
	v.Capacity.PerSecond, v.Capacity.RetryShare, v.Capacity.WindowS = 0.2, 0.03, 900
	v.Projection.ByLane = map[string]float64{"submitted": 1.2, "discovered": 1.4}
	v.Projection.Verdict, v.Projection.DrainSeconds = "falling behind by 180 renders/h", -1
	full, err := json.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	for _, n := range []int{0, 1, len(full) / 3, len(full) / 2, len(full) - 1} {
		f.Add(full[:n]) // cut mid-view, as a worker 0 killed mid-answer leaves it
	}
	f.Add([]byte(`{"demand": {"by_lane": {"submitted": "x"}}}`))
	f.Add([]byte(`{"demand": {"total": 1e400}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := wire.DecodeCapacity(bytes.NewReader(body))
		if err != nil {
			return
		}
		canon, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("a decoded view does not encode: %v", err)
		}
		again, err := wire.DecodeCapacity(bytes.NewReader(canon))
		if err != nil || !reflect.DeepEqual(got, again) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, got, again)
		}
	})
}

// TestCapacityDecodeBounded: a view larger than wire.MaxCapacityBody is refused, not read whole.
func TestCapacityDecodeBounded(t *testing.T) {
	big := `{"demand": {"by_route": {"` + strings.Repeat("a", wire.MaxCapacityBody) + `": 1}}}`
	if _, err := wire.DecodeCapacity(strings.NewReader(big)); err == nil {
		t.Fatal("a view past the bound was accepted")
	}
}

// FuzzPlanEndpoint feeds arbitrary configuration files to POST /v1/plan over a store with a
// few rows: never a panic or a 5xx; 200 exactly when config.Parse accepts the body, with a
// plan whose current side counts the rows; otherwise a 4xx whose JSON error names a field.
func FuzzPlanEndpoint(f *testing.F) {
	st, err := badgerstore.Open(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	now := int64(1_800_000_000_000)
	for _, k := range []string{"desktop|https://a.test/", "desktop|https://a.test/c/1", "mobile|https://a.test/p/2", "desktop|https://a.test/x"} {
		sch, err := store.NewSchedule([]byte(k), now, k[0] == 'd', 0, store.Lanes{})
		if err != nil {
			f.Fatal(err)
		}
		if err := st.WriteSchedule(sch); err != nil {
			f.Fatal(err)
		}
	}
	cur := mustPolicy(config.Default())
	mux := http.NewServeMux()
	(&api.Plan{Compute: func(ctx context.Context, file []byte) (wire.Plan, error) {
		next, err := settings.ParsePlan(ctx, file)
		if err != nil {
			return wire.Plan{}, err
		}
		return capacity.Plan(st, cur, next, capacity.Capacity{PerSecond: 0.01}, 3)
	}}).Register(mux)

	good := "routes:\n  - {name: home, match: exact, path: /, interval: 1h}\n  - {name: catalog, match: prefix, path: /c/, interval: 6h}\nrender:\n  default_interval: 12h\n  demand: {ladder: [3h, 6h]}\n"
	f.Add([]byte(good))
	for _, n := range []int{0, 1, 7, len(good) / 2, len(good) - 3} {
		f.Add([]byte(good[:n])) // cut mid-file
	}
	f.Add([]byte("routes: ! "))
	f.Add([]byte("routes:\n  - {name: x, match: regex, path: /c/, interval: 1h}\n"))
	f.Add([]byte("queue:\n  lease_ttl: 1s\n"))
	f.Add([]byte("colour: blue\n"))
	f.Add([]byte("a: &a [*a]\n"))
	for _, seed := range aliasSeeds(f) {
		f.Add(seed)
	}
	f.Add([]byte("routes: [{name: c, match: prefix, path: /c/, interval: 400d}]"))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, wire.PathPlan, bytes.NewReader(body)))
		_, parseErr := config.Parse(body)
		accept := parseErr == nil && len(body) > 0 && len(body) <= wire.MaxPlanBody
		switch {
		case rec.Code >= 500:
			t.Fatalf("%d for %q: %s", rec.Code, body, rec.Body)
		case accept && rec.Code != http.StatusOK, !accept && rec.Code == http.StatusOK:
			t.Fatalf("%d for %q (parse: %v): %s", rec.Code, body, parseErr, rec.Body)
		case rec.Code == http.StatusOK:
			var p wire.Plan
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Current.Rows != 4 || len(p.Lines) == 0 {
				t.Fatalf("plan %s: %v", rec.Body, err)
			}
		default:
			var e wire.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || (rec.Code == http.StatusBadRequest && e.Field == "") {
				t.Fatalf("%d refusal without a named field: %s", rec.Code, rec.Body)
			}
		}
	})
}

// mustPolicy is the policy of a validated configuration, as a node compiles it.
func mustPolicy(cfg *config.Config) *policy.Policy {
	pol, err := assemble.Policy(cfg)
	if err != nil {
		panic(err) // a validated configuration's policy always compiles
	}
	return pol
}
